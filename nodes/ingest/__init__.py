"""The nodes of the ``ingest`` graph: which files are documents (I1), and add, keep or replace each (I2)."""
