# syntax=docker/dockerfile:1
# All agentq binaries in one small image: static, non-root.
#   docker build -t agentq .
#   docker run --rm agentq worker --help
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0
RUN go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/worker ./cmd/enqueue ./cmd/dashboard ./cmd/chaosllm

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
EXPOSE 8080 8081 9091
ENTRYPOINT []
CMD ["worker", "--help"]
