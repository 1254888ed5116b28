# The Jury worker image: Jury, git, bubblewrap, and the agent CLIs named in AGENTS, all installed when the
# image is built (never at each container start).
#
#   docker build -t jury --build-arg AGENTS="codex claude" .
#   docker run --rm --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#       --security-opt systempaths=unconfined jury doctor
#
# AGENTS names agents of config/agents/*.toml whose install hint is an npm package (codex, claude,
# gemini, opencode, qwen, copilot, amp, grok, kimi); docker/install_agents.py installs them. The sandbox
# needs user namespaces, mount and a fresh /proc inside the container: see docs/deployment.md.
# This file is checked by tests/unit/test_deploy_files.py; no image was built where it was written.

ARG NODE_IMAGE=node:22-bookworm-slim
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# The agent CLIs are Node programs: Node from its own image (Debian's is too old for some of them).
FROM ${NODE_IMAGE} AS node

FROM ${PYTHON_IMAGE}
ARG AGENTS=""
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# git (the reviewed repositories), bubblewrap (the sandbox), tini (pid 1: reaps what agents leave).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git bubblewrap tini ca-certificates \
 && rm -rf /var/lib/apt/lists/*

COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx

# The agents first: they change less often than Jury's code, so this layer stays cached.
COPY config/agents/ /opt/jury-build/agents/
COPY docker/install_agents.py /opt/jury-build/install_agents.py
RUN python /opt/jury-build/install_agents.py --catalog /opt/jury-build/agents ${AGENTS} \
 && rm -rf /root/.npm

WORKDIR /opt/jury
COPY pyproject.toml README.md ./
COPY config/ config/
COPY orchestrator/ orchestrator/
COPY workers/ workers/
COPY jury_cli/ jury_cli/
RUN pip install --no-cache-dir . && rm -rf /opt/jury-build

# Workers run as an unprivileged user: inside the sandbox, root-owned files outside HOME stay readable
# to a worker that runs as root (docs/security.md).
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin jury
USER jury
WORKDIR /home/jury
ENV JURY_DIR=/home/jury/.jury JURY_LOG_JSON=true
RUN mkdir -p /home/jury/.jury
VOLUME ["/home/jury/.jury"]
EXPOSE 9100

ENTRYPOINT ["tini", "--", "jury"]
# The metrics on every address: a container's loopback is out of a scraper's reach (docs/operations.md, "Metrics").
CMD ["worker", "--metrics-port", "9100", "--metrics-host", "0.0.0.0"]
