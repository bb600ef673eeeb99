# syntax=docker/dockerfile:1
#
# One image recipe for every Go program in the repository. The build context
# is the repo root, so go.work, pkg/ and every module are available; the
# PROGRAM build argument names the main package to build, for example
# services/order/cmd/order. docker-compose.yml sets it per service, and
# pkg/testkit/composecheck fails the tests when the two drift apart.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
ARG PROGRAM
WORKDIR /src
COPY . .
RUN test -n "${PROGRAM}" || { echo "build arg PROGRAM is required (e.g. services/order/cmd/order)" >&2; exit 1; }
# -tags nomsgpack leaves gin's MessagePack codec out: nothing here speaks
# MessagePack, and it was a sixth of each binary (35.7 MB without the tag,
# 29.4 MB with it). make lab builds with the same tag.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -tags nomsgpack -trimpath -ldflags="-s -w" -o /out/app ./${PROGRAM}

# debian:bookworm-slim, the Debian of the build stage, as a non-root user.
# No shell or wget is needed by the healthchecks: every program answers
# `app healthcheck URL` (pkg/httpserver.Healthcheck).
FROM debian:bookworm-slim
COPY --from=build /out/app /usr/local/bin/app
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/app"]
