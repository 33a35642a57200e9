"""The SQL flows shared by the two SQL backends (fencing.sql and fencing.django), no driver."""
