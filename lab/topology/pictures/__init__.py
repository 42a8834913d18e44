"""Text pictures of a topology (render: the links and the SLIT, also the report's)."""
