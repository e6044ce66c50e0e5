"""Import and export of data sets."""
