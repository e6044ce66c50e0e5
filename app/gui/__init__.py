"""The Qt shell: the only part of app that imports Qt."""
