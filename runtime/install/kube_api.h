// KubeApi: the few Kubernetes API calls the node installer makes, from
// inside its pod. In-cluster config (the API's service address from the
// environment, the service account's token and CA), one JSON merge patch
// per call over HTTPS with the server's certificate verified against that
// CA only; error bodies are read bounded and decoded as a Kubernetes Status.
#pragma once

#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::install {

// Where kubelet mounts a pod's service account (projected volume).
inline constexpr char kInClusterTokenFile[] = "/var/run/secrets/kubernetes.io/serviceaccount/token";
inline constexpr char kInClusterCaFile[] = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

struct KubeApiOptions {
  // https://HOST[:PORT]; "" = https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT.
  std::string api_url;
  std::string token_file = kInClusterTokenFile;  // bearer token, re-read on every Create
  std::string ca_file = kInClusterCaFile;        // the only CA the server may chain to
  int connect_timeout_ms = 5000;                 // TCP connect + TLS handshake
  int io_timeout_ms = 10000;                     // each read or write
  int request_deadline_ms = 30000;               // the whole call, answer included (stopped once over)
};

// A resolved endpoint and credentials. One call per object is typical; the
// object holds no connection between calls.
class KubeApi {
 public:
  // Resolves the URL, reads the token and checks the CA file is there.
  static Result<KubeApi> Create(const KubeApiOptions& opts);

  // PATCH `path` (e.g. /api/v1/nodes/n1) with a JSON merge patch. OK on a
  // 2xx answer; otherwise the error names the request, the HTTP status and
  // the API's Status message.
  Status MergePatch(const std::string& path, const std::string& json_patch) const;

  // "https://10.96.0.1:443"
  const std::string& url() const { return url_; }

 private:
  KubeApi() = default;

  std::string host_;  // no brackets around an IPv6 address
  int port_ = 443;
  std::string url_;
  std::string token_;
  KubeApiOptions opts_;
};

// The error part of a failed answer's body: the Kubernetes Status message
// when the body is one, else a short printable excerpt. `truncated`: the
// body was longer than the client reads. Bounded, single line.
std::string DescribeErrorBody(std::string_view body, bool truncated);

// The Status code for an HTTP status the API answered with.
Code CodeForHttpStatus(int http_status);

}  // namespace capsule::install
