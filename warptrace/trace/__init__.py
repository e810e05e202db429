"""The on-disk trace: schema, streaming writer and validating reader (pyarrow only)."""
