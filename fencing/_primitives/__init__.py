"""The primitives built on fences: semaphores, rate limiters, read-write locks, elections."""
