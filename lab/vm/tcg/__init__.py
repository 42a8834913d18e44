"""TCG instrumentation: the guest's clock (guest_clock, tcg_clock, tcg_boot), the remote-latency model
(latency_model) and the access-matrix plugin (access_plugin). The instruments a run holds, in one shape, are
lab.run.instrument's."""
