"""Entry point of the bundled application (PyInstaller): the same as the `dynadesk` command."""

import multiprocessing

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from app.cli import main

    main()
