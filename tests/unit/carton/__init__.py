"""The carton format library on its own (fixtures from ``../shared/fixtures``); may import
``registry.carton`` only, like the library itself imports nothing else of ours."""
