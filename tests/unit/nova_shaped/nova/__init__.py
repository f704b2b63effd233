"""Stand-in for the nova package (see ../README.md)."""
