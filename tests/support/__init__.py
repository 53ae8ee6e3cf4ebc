"""What the tests share: the RPC group they start, the workers it runs, and the interfaces,
modules and RPC functions they send to those workers (importable on every worker, no side
effects on import)."""
