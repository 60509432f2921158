# The operator image: `rayjob-advisor run` (controller or webhook role). No build tools, no Ray or
# PyTorch (only `rayjob-advisor profile` needs them), a non-root user, nothing written to the root
# filesystem (HOME is /tmp, an emptyDir in the chart), so it runs with readOnlyRootFilesystem.
# Build it as docs/releasing.md says: docker build --build-arg VERSION=0.1.0 -t rayjob-advisor:0.1.0 .
#
# The base image, pinned by digest: PLACEHOLDER, the digest below (all zeros) was not looked up (no registry was
# reachable where this was written). Put python:3.11-slim's digest here before building
# (`docker buildx imagetools inspect python:3.11-slim`; docs/releasing.md), or pass --build-arg PYTHON_IMAGE=...
ARG PYTHON_IMAGE=python:3.11-slim@sha256:0000000000000000000000000000000000000000000000000000000000000000

FROM ${PYTHON_IMAGE} AS build
# The package's version, which setuptools-scm reads from git where there is one (the build context has no .git).
ARG VERSION=""
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY operator ./operator
RUN SETUPTOOLS_SCM_PRETEND_VERSION_FOR_RAYJOB_ADVISOR="${VERSION}" \
    pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
RUN groupadd --gid 10001 advisor \
    && useradd --uid 10001 --gid advisor --no-create-home --shell /usr/sbin/nologin advisor
# The runtime dependencies exactly as locked, every file checked against its hash (hack/lock-image), then the
# advisor's own wheel alone.
COPY requirements-image.txt /tmp/requirements-image.txt
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --require-hashes --only-binary :all: -r /tmp/requirements-image.txt \
    && pip install --no-cache-dir --no-deps /wheels/rayjob_advisor-*.whl \
    && rm -rf /wheels /tmp/requirements-image.txt
ENV HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 8080 8443 9090
ENTRYPOINT ["rayjob-advisor"]
CMD ["run"]
