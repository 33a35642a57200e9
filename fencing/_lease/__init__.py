"""The lease layer: the fence protocol without I/O, FenceCore, the blocking and asyncio fences."""
