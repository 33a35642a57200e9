"""The lease layer: the fence protocol without I/O, BaseFence, the blocking and asyncio fences."""
