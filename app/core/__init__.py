"""The ground floor of the desk: domain, storage, services, task definitions and files. Qt-free, and below
sync: everything above (sync, the view-models, the Qt shell and the CLI) builds on it."""
