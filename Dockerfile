# syntax=docker/dockerfile:1
# lkscore: a static Go binary on an empty base, run as a non-root user.
#   docker build --build-arg VERSION=$(git describe --tags --always) -t lkscore .
# The final stage is FROM scratch with CA certificates and a passwd entry, so it
# holds nothing but the binary; run it with a read-only root filesystem.

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The build line below is run as-is by deploy/test (TestImageBinary).
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/lkscore ./cmd/lkscore
RUN echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' > /out/passwd && \
    echo 'nonroot:x:65532:' > /out/group

FROM scratch
ARG VERSION=dev
LABEL org.opencontainers.image.title="lkscore" \
      org.opencontainers.image.description="Reliability scorecards for LiveKit voice-agent sessions" \
      org.opencontainers.image.source="https://github.com/lkscore/lkscore" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/group /etc/group
COPY --from=build /out/lkscore /lkscore
USER 65532:65532
# Webhooks and uploads on 8080; /healthz, /readyz, /metrics on 9090 (on every
# interface in the image: the binary's default is loopback). The dashboard on
# 9090 wants LKSCORE_DASHBOARD_TOKEN from off the container's loopback.
EXPOSE 8080 9090
ENV LKSCORE_DATA_DIR=/tmp/lkscore-data LKSCORE_OPS_LISTEN=:9090
ENTRYPOINT ["/lkscore"]
CMD ["serve"]
