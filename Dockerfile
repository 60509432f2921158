# The operator image: `rayjob-advisor run` (controller or webhook role). No build tools, no Ray or
# PyTorch (only `rayjob-advisor profile` needs them), a non-root user, nothing written to the root
# filesystem (HOME is /tmp, an emptyDir in the chart), so it runs with readOnlyRootFilesystem.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN groupadd --gid 10001 advisor \
    && useradd --uid 10001 --gid advisor --no-create-home --shell /usr/sbin/nologin advisor
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels /wheels/rayjob_advisor-*.whl && rm -rf /wheels
ENV HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 8080 8443 9090
ENTRYPOINT ["rayjob-advisor"]
CMD ["run"]
