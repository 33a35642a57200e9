"""The resource layer: the guard side, marks, the file record, guard and FileStore."""
