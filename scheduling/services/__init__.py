"""Engine results and user decisions -> ORM writes. Every write is one transaction."""
