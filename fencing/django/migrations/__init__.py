"""The migrations of ``fencing.django`` (its ``fencing_leases`` table)."""
