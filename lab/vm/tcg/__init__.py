"""TCG instrumentation: the guest's clock (guest_clock, tcg_clock, tcg_boot), the remote-latency model
(latency_model) and the access-matrix plugin (access_plugin)."""
