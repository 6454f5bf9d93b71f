# factgate: a static binary on a minimal base, running as a non-root user.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/factgate ./cmd/factgate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/factgate /usr/local/bin/factgate
COPY --chown=nonroot:nonroot configs/ /etc/factgate/
USER nonroot:nonroot
EXPOSE 8080
# The healthcheck calls the binary itself (the image has no shell or curl).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["/usr/local/bin/factgate", "healthcheck", "--url", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["/usr/local/bin/factgate"]
CMD ["serve", "--config", "/etc/factgate/factgate.yaml", "--listen", "0.0.0.0:8080"]
