"""Qt views. They receive data through signals and Qt models and never touch storage or model runtimes."""
