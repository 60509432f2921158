"""rayjob-advisor's test kit, shared by the tests, the benchmarks and hack/try-operator.py.

- ``paths``: where the repository and the shared data (KubeRay CRDs and samples, Pollux) are;
- ``schemas``: CRD schemas as the API server applies them (defaulting, validation);
- ``emulator``: a strict Kubernetes API server on kmock, and a runner for any kopf operator against it;
- ``resources``: what the emulator serves for the advisor (RayJobs, RuntimeProfiles, core resources);
- ``rayjobs``: RayJob builders, checked against the real KubeRay CRD;
- ``profiles``: synthetic runs and RuntimeProfiles of a known runtime law;
- ``certificates``: a throw-away CA and server certificate;
- ``admission``: an HTTPS AdmissionReview client;
- ``advisor``: the real operator (controller or webhook role) against the emulator, in one context manager.
"""
