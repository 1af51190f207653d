# The Trellis server with the order sample: a static binary on a minimal,
# non-root image. Build: docker build -t trellis .
# No "# syntax=" line: nothing here needs a newer frontend than the one
# built into Docker, and naming one makes BuildKit pull it from a registry.
#
# The base images are named by tag, not pinned by digest: a digest freezes
# the image, security fixes included, until someone bumps it, and this
# repository has no bot that does. A production build should pin both
# (FROM image:tag@sha256:…) and let Renovate or Dependabot bump them.
FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so that a change to the code does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/trellis-server ./cmd/server

# distroless/static: no shell, no package manager, a nonroot user (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/trellis-server /trellis-server
USER nonroot:nonroot
# Change the port with TRELLIS_HTTP_ADDR, not with -addr: the health check
# reads the variable to find the server.
ENV TRELLIS_HTTP_ADDR=:9000
EXPOSE 9000
# The cluster port (with a Redis store; TRELLIS_CLUSTER_ADDR): only the
# other instances reach it, on the private network. Never publish it.
EXPOSE 25520
# The image has no curl: the binary checks its own /healthz over loopback,
# giving up after 2 s, within Docker's 3 s timeout (exit 0 healthy, 1 not).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/trellis-server", "-healthcheck"]
ENTRYPOINT ["/trellis-server"]
