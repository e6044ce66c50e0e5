"""Qt-free services; every write goes through the database unit of work."""
