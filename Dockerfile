# tfnorm GPU Jupyter image: JupyterLab, key-only SSH and TensorBoard on top of
# TensorFlow's GPU Jupyter image. Build context: the repository root.
#
#   docker compose build                       (docker-compose.yml, README)
#   docker build -t tfnorm-lab .
#   docker build --build-arg BASE_IMAGE=tensorflow/tensorflow:2.16.1-gpu-jupyter .
#
# The default base is the one the product is built for: TensorFlow 2.9.0
# (Keras 2.9), Ubuntu 20.04, Python 3.8, CUDA 11.2 / cuDNN 8.1, classic
# Notebook only, run as root. A newer `-gpu-jupyter` tag (Keras 3) works with
# the same file.
ARG BASE_IMAGE=tensorflow/tensorflow:2.9.0-gpu-jupyter
FROM ${BASE_IMAGE}

ARG TFNORM_USER=tfnorm
ARG TFNORM_UID=1000
ARG TFNORM_GID=1000
# JupyterLab 4.2 is the last release line that supports Python 3.8. Notebook
# 7.2 is its companion: the base's classic Notebook 6 crashes once JupyterLab
# brings a newer traitlets, and `jupyter notebook` is a habit of that image.
ARG JUPYTERLAB_SPEC="jupyterlab>=4.2,<4.3"
ARG NOTEBOOK_SPEC="notebook>=7.2,<7.3"

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# The base image still lists NVIDIA's apt repositories (cuda.list,
# tensorRT.list, ...), whose signing keys were rotated in 2022: `apt-get
# update` fails while any of them is present, so every list that names NVIDIA
# goes, whatever its file name. Ubuntu's own packages are all this image
# needs. Versions are the distribution's (not pinned: the base release fixes
# them). The host keys openssh-server's install generates are deleted: each
# container makes its own at first start.
# hadolint ignore=DL3008
RUN find /etc/apt/sources.list.d -type f \( -iname '*cuda*' -o -iname '*nvidia*' \
        -o -iname '*tensorrt*' -o -exec grep -qi nvidia {} \; \) -print -delete \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        curl openssh-server tini tmux \
    && rm -f /etc/ssh/ssh_host_*_key /etc/ssh/ssh_host_*_key.pub \
    && rm -rf /var/lib/apt/lists/*

# tfnorm and JupyterLab must not touch the base image's TensorFlow stack: its
# installed versions become constraints, so pip fails instead of reinstalling,
# upgrading or downgrading TensorFlow, Keras, TensorBoard, NumPy or protobuf,
# and `pip check` fails the build on any inconsistency. The base's pip (held
# below 20.3 in the 2.9 image) is replaced by one with the dependency
# resolver, but older than 24.1: from 24.1 pip refuses to work at all beside
# a package with invalid metadata, and the 2.9 image ships one (bleach 5.0.0).
# JupyterLab comes before tfnorm's sources, so a change to tfnorm rebuilds
# only the small layers after them.
RUN mkdir -p /opt/tfnorm \
    && python3 -m pip freeze \
        | grep -iE '^(tensorflow[a-z0-9_.-]*|tf[-_][a-z0-9_.-]+|keras[a-z0-9_.-]*|tensorboard[a-z0-9_.-]*|numpy|protobuf|h5py)==' \
        > /opt/tfnorm/tf-stack-constraints.txt \
    && grep -iqE '^tensorflow' /opt/tfnorm/tf-stack-constraints.txt \
    && python3 -m pip install --no-cache-dir -c /opt/tfnorm/tf-stack-constraints.txt "pip>=21.3,<24.1" \
    && python3 -m pip install --no-cache-dir -c /opt/tfnorm/tf-stack-constraints.txt \
        "${JUPYTERLAB_SPEC}" "${NOTEBOOK_SPEC}" \
    && python3 -m pip check

# The non-root user that runs everything and owns /workspace. Its UID/GID
# should match the host user's, so files in the mounted runs/ stay editable.
RUN if ! getent group "${TFNORM_GID}" > /dev/null; then \
        groupadd --gid "${TFNORM_GID}" "${TFNORM_USER}"; \
    fi \
    && useradd --uid "${TFNORM_UID}" --gid "${TFNORM_GID}" --create-home \
        --shell /bin/bash "${TFNORM_USER}" \
    && install -d -o "${TFNORM_UID}" -g "${TFNORM_GID}" -m 0755 \
        /workspace /workspace/notebooks /workspace/data /workspace/runs /var/cache/cuda \
    && install -d -o "${TFNORM_UID}" -g "${TFNORM_GID}" -m 0700 \
        /run/tfnorm /var/lib/tfnorm/ssh \
    && install -d -m 0755 /etc/tfnorm

COPY setup.cfg pyproject.toml README.md /opt/tfnorm/src/
COPY tfnorm /opt/tfnorm/src/tfnorm
RUN python3 -m pip install --no-cache-dir -c /opt/tfnorm/tf-stack-constraints.txt /opt/tfnorm/src \
    && python3 -m pip check

# The entrypoint (entrypoint.py, which imports its modules from
# tfnorm_entrypoint/ beside it), the healthcheck and the sshd_config template.
COPY docker/ /opt/tfnorm/docker/
COPY docker/profile-session-env.sh /etc/profile.d/tfnorm-session-env.sh
# Commands on the ssh line read /etc/bash.bashrc, not the profile: the same
# hook goes first there (docker/bashrc-ssh-command.sh). The TensorFlow images
# leave that file world-writable; it is root's alone from here on.
RUN { cat /opt/tfnorm/docker/bashrc-ssh-command.sh; \
      cat /etc/bash.bashrc 2>/dev/null || true; } > /tmp/bash.bashrc \
    && install -m 0644 -o root -g root /tmp/bash.bashrc /etc/bash.bashrc \
    && rm /tmp/bash.bashrc
# Modules to copy for `tfnorm train --model-fn/--data-fn` (README).
COPY examples/ /workspace/examples/

# CUDA_CACHE_PATH is a volume in docker-compose.yml: on GPUs newer than the
# ones TF 2.9 was compiled for (Ada, Hopper) its kernels are JIT-compiled from
# PTX on first use, which takes long enough to be worth keeping (4 GiB max).
ENV TFNORM_USER=${TFNORM_USER} \
    TFNORM_WORKSPACE=/workspace \
    TFNORM_RUNTIME_DIR=/run/tfnorm \
    TFNORM_SSH_HOST_KEY_DIR=/var/lib/tfnorm/ssh \
    TFNORM_AUTHORIZED_KEYS_FILE=/etc/tfnorm/authorized_keys \
    JUPYTER_PORT=8888 \
    SSH_PORT=22 \
    CUDA_CACHE_PATH=/var/cache/cuda \
    CUDA_CACHE_MAXSIZE=4294967296 \
    TF_FORCE_GPU_ALLOW_GROWTH=true

WORKDIR /workspace
USER ${TFNORM_USER}
EXPOSE 8888 22

HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["/opt/tfnorm/docker/healthcheck.sh"]

# tini is PID 1: it reaps orphans (runs started with nohup over SSH) and
# passes docker stop's SIGTERM to the entrypoint, which stops every process.
ENTRYPOINT ["/usr/bin/tini", "--", "python3", "/opt/tfnorm/docker/entrypoint.py"]
CMD ["lab"]
