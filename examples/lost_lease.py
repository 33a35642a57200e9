"""Lost-lease signals: a long job learns at once that its lease is gone, and stops.

Run: python examples/lost_lease.py
"""

import asyncio

import fencing
import fencing.aio

issuer = fencing.MemoryIssuer()  # one process here; every backend signals the same way
fence = fencing.MemoryFence("nightly-report", ttl=0.6, issuer=issuer)


def stop_work(error: fencing.LeaseLost) -> None:
    print(f"on_lost: {error}")  # runs once, in the hold's renewal thread


hold = fence.hold(on_lost=stop_work)
try:
    with hold as token:
        print(f"working with token {token:d}")
        issuer.force_release("nightly-report")  # what `fencing release --force` does
        if hold.wait_lost(timeout=30):  # a real job checks `hold.lost` between steps
            print("the lease is gone: stopping early")
except fencing.LeaseLost as error:
    print(f"leaving the hold raised LeaseLost for token {error.token:d}")


async def main() -> None:
    afence = fencing.aio.MemoryFence("nightly-report", ttl=0.6, issuer=issuer)
    try:
        async with afence.hold(cancel_on_loss=True) as token:
            print(f"the asyncio job works with token {token:d}")
            issuer.force_release("nightly-report")
            await asyncio.sleep(3600)  # cancelled once the renewal finds the lease gone
    except fencing.LeaseLost as error:
        print(f"its body was cancelled: LeaseLost from {type(error.__cause__).__name__}")


asyncio.run(main())
