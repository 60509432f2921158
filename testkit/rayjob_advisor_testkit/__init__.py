"""rayjob-advisor's test kit, shared by the tests, the benchmarks and hack/try-operator.py.

- ``paths``: where the repository, the vendored KubeRay CRDs and samples, and the optional datasets are;
- ``schemas``: CRD schemas as the API server applies them (defaulting, validation);
- ``emulator``: a strict Kubernetes API server on kmock, and a runner for any kopf operator against it
  (a package, one module per concern);
- ``resources``: what the emulator serves for the advisor (RayJobs, RuntimeProfiles, core resources);
- ``rayjobs``: RayJob builders, checked against the real KubeRay CRD;
- ``profiles``: synthetic runs and RuntimeProfiles of a known runtime law, and the jobs of that workload;
- ``certificates``: a throw-away CA and server certificate;
- ``https``: a client of the advisor's HTTPS endpoints; ``admission``: an HTTPS AdmissionReview client;
- ``advisor``: the real operator (controller or webhook role) against the emulator, in one context manager;
- ``lifecycle``: a RayJob's life there: the annotations written on it, KubeRay finishing it, what was learned;
- ``advice``: ``advise()``'s answers read without an operator: its patch applied, its annotations;
- ``chart``: the Helm chart rendered into objects;
- ``prometheus``: Prometheus's tools, the dashboard's queries, the series the advisor exports;
- ``fits``: counting estimator fits.
"""
