//! The nginx baseline: nginx as a plain streaming reverse proxy in front of the simulator.
