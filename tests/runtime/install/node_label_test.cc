// The installer's node label (runtime/install/node_label.h, kube_api.h)
// against a fake Kubernetes API server over HTTPS: the merge patches as
// sent, the API's errors as reported, and the TLS checks. No real
// kube-apiserver can run here (this host has no Kubernetes), so the fake is
// the only peer; its CA and certificates are made at test time with
// OpenSSL's C API, so no openssl CLI or fixed key material is needed.
#include "runtime/install/node_label.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::install {
namespace {

// --- Test PKI (OpenSSL C API) ------------------------------------------

struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct X509Free {
  void operator()(X509* c) const { X509_free(c); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free_all(b); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using BioPtr = std::unique_ptr<BIO, BioFree>;

struct KeyPair {
  PkeyPtr key;
  X509Ptr cert;
};

bool AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A P-256 key and a certificate for it: self-signed when `issuer` is null
// (a CA), else a server certificate for `san` signed by `issuer`.
KeyPair MakeCert(const char* cn, const KeyPair* issuer, const char* san) {
  static long serial = 1;
  KeyPair out;
  out.key.reset(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  out.cert.reset(X509_new());
  if (!out.key || !out.cert) return {};
  X509* c = out.cert.get();
  X509_set_version(c, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(c), serial++);
  X509_gmtime_adj(X509_getm_notBefore(c), -3600);
  X509_gmtime_adj(X509_getm_notAfter(c), 24 * 3600);
  X509_set_pubkey(c, out.key.get());
  X509_NAME_add_entry_by_txt(X509_get_subject_name(c), "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn),
                             -1, -1, 0);
  X509* signer_cert = issuer ? issuer->cert.get() : c;
  EVP_PKEY* signer_key = issuer ? issuer->key.get() : out.key.get();
  X509_set_issuer_name(c, X509_get_subject_name(signer_cert));
  bool ok = true;
  if (issuer == nullptr) {
    ok = AddExt(c, c, NID_basic_constraints, "critical,CA:TRUE") &&
         AddExt(c, c, NID_key_usage, "critical,keyCertSign,cRLSign") &&
         AddExt(c, c, NID_subject_key_identifier, "hash");
  } else {
    ok = AddExt(c, signer_cert, NID_basic_constraints, "critical,CA:FALSE") &&
         AddExt(c, signer_cert, NID_key_usage, "critical,digitalSignature") &&
         AddExt(c, signer_cert, NID_ext_key_usage, "serverAuth") &&
         AddExt(c, signer_cert, NID_subject_alt_name, san);
  }
  if (!ok || X509_sign(c, signer_key, EVP_sha256()) == 0) return {};
  return out;
}

bool WritePem(const std::string& path, X509* cert, EVP_PKEY* key) {
  BioPtr bio(BIO_new_file(path.c_str(), "w"));
  if (!bio) return false;
  if (cert != nullptr) return PEM_write_bio_X509(bio.get(), cert) == 1;
  return PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
}

// --- The fake API server --------------------------------------------------

struct Recorded {
  std::string method;
  std::string path;
  std::string content_type;
  std::string authorization;
  std::string body;
};

// An HTTPS server on 127.0.0.1 (any free port) that records every request
// and gives each the same answer.
class FakeApiServer {
 public:
  FakeApiServer(const std::string& cert, const std::string& key) : server_(cert.c_str(), key.c_str()) {
    auto handler = [this](const httplib::Request& req, httplib::Response& res) { Handle(req, res); };
    server_.Get(".*", handler).Post(".*", handler).Put(".*", handler).Patch(".*", handler).Delete(".*", handler);
    if (!server_.is_valid()) return;
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ > 0) thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;
  ~FakeApiServer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    if (!thread_.joinable()) return;
    // stop() is a no-op until the listener runs; it starts at once.
    while (!server_.is_running()) std::this_thread::yield();
    server_.stop();
    thread_.join();
  }

  int port() const { return port_; }
  void Answer(int status, std::string body, std::string content_type = "application/json") {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    body_ = std::move(body);
    content_type_ = std::move(content_type);
  }
  // Requests are held unanswered until the server goes away.
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = true;
  }
  std::vector<Recorded> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Handle(const httplib::Request& req, httplib::Response& res) {
    std::unique_lock<std::mutex> lock(mu_);
    requests_.push_back({req.method, req.path, req.get_header_value("Content-Type"),
                         req.get_header_value("Authorization"), req.body});
    cv_.wait(lock, [this] { return !hold_ || closing_; });
    res.status = status_;
    res.set_content(body_, content_type_.c_str());
  }

  httplib::SSLServer server_;
  int port_ = -1;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Recorded> requests_;  // guarded by mu_
  int status_ = 200;                // guarded by mu_
  std::string body_ = R"({"kind":"Node","apiVersion":"v1","metadata":{"name":"worker-1"}})";  // guarded by mu_
  std::string content_type_ = "application/json";  // guarded by mu_
  bool hold_ = false;                               // guarded by mu_
  bool closing_ = false;                            // guarded by mu_
  std::thread thread_;
};

// --- Fixture ----------------------------------------------------------------

constexpr char kToken[] = "eyJhbGciOiJSUzI1NiJ9.test-token";

class NodeLabelTest : public ::testing::Test {
 protected:
  // The fake server's writes to a client that hung up must not kill the test.
  static void SetUpTestSuite() { ::signal(SIGPIPE, SIG_IGN); }

  void SetUp() override {
    auto d = TempDir::Create("node-label");
    ASSERT_OK(d);
    dir_ = std::make_unique<TempDir>(std::move(*d));
    KeyPair ca = MakeCert("test cluster CA", nullptr, nullptr);
    KeyPair other_ca = MakeCert("some other CA", nullptr, nullptr);
    ASSERT_TRUE(ca.cert && other_ca.cert);
    KeyPair server = MakeCert("kube-apiserver", &ca, "IP:127.0.0.1,DNS:localhost");
    KeyPair elsewhere = MakeCert("elsewhere", &ca, "DNS:api.elsewhere.example");
    KeyPair by_other = MakeCert("kube-apiserver", &other_ca, "IP:127.0.0.1,DNS:localhost");
    ASSERT_TRUE(server.cert && elsewhere.cert && by_other.cert);
    ASSERT_TRUE(WritePem(Path("ca.crt"), ca.cert.get(), nullptr));
    for (auto& [name, kp] : {std::pair<const char*, KeyPair*>{"server", &server}, {"elsewhere", &elsewhere},
                             {"by-other", &by_other}}) {
      ASSERT_TRUE(WritePem(Path(std::string(name) + ".crt"), kp->cert.get(), nullptr));
      ASSERT_TRUE(WritePem(Path(std::string(name) + ".key"), nullptr, kp->key.get()));
    }
    ASSERT_OK(WriteFile(Path("token"), std::string(kToken) + "\n"));
  }

  std::string Path(const std::string& name) const { return dir_->Join(name); }

  // A server presenting `<name>.crt`, signed by ca.crt unless said otherwise.
  std::unique_ptr<FakeApiServer> Serve(const std::string& name = "server") {
    auto s = std::make_unique<FakeApiServer>(Path(name + ".crt"), Path(name + ".key"));
    EXPECT_GT(s->port(), 0) << "fake API server did not start";
    return s;
  }

  KubeApiOptions Options(const FakeApiServer& s) const {
    KubeApiOptions o;
    o.api_url = "https://127.0.0.1:" + std::to_string(s.port());
    o.token_file = Path("token");
    o.ca_file = Path("ca.crt");
    o.connect_timeout_ms = 2000;
    o.io_timeout_ms = 5000;
    o.request_deadline_ms = 10000;
    return o;
  }

  std::unique_ptr<TempDir> dir_;
};

std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  nlohmann::json j = {{"kind", "Status"},     {"apiVersion", "v1"}, {"metadata", nlohmann::json::object()},
                      {"status", "Failure"},  {"message", message}, {"reason", reason},
                      {"details", {{"name", "worker-1"}, {"kind", "nodes"}}}, {"code", code}};
  return j.dump();
}

// --- Label and unlabel ----------------------------------------------------

TEST_F(NodeLabelTest, LabelSendsAMergePatchWithTheBearerToken) {
  auto server = Serve();
  ASSERT_OK(LabelNode(Options(*server), "worker-1"));
  auto reqs = server->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "PATCH");
  EXPECT_EQ(reqs[0].path, "/api/v1/nodes/worker-1");
  EXPECT_EQ(reqs[0].content_type, "application/merge-patch+json");
  EXPECT_EQ(reqs[0].authorization, std::string("Bearer ") + kToken);  // the file's newline trimmed
  EXPECT_EQ(nlohmann::json::parse(reqs[0].body),
            nlohmann::json::parse(R"({"metadata":{"labels":{"capsule.io/runtime":"true"}}})"));
}

TEST_F(NodeLabelTest, UnlabelSendsNullForTheLabel) {
  auto server = Serve();
  ASSERT_OK(UnlabelNode(Options(*server), "ip-10-0-0-7.eu-west-1.compute.internal"));
  auto reqs = server->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].method, "PATCH");
  EXPECT_EQ(reqs[0].path, "/api/v1/nodes/ip-10-0-0-7.eu-west-1.compute.internal");
  EXPECT_EQ(reqs[0].content_type, "application/merge-patch+json");
  EXPECT_EQ(reqs[0].authorization, std::string("Bearer ") + kToken);
  EXPECT_EQ(reqs[0].body, R"({"metadata":{"labels":{"capsule.io/runtime":null}}})");
}

TEST_F(NodeLabelTest, SuccessDoesNotNeedTheWholeAnswer) {
  // A Node with a long image list runs to megabytes; none of it is read.
  auto server = Serve();
  server->Answer(200, std::string(4 << 20, ' ') + "{}");
  EXPECT_OK(LabelNode(Options(*server), "worker-1"));
}

TEST_F(NodeLabelTest, InClusterConfigComesFromTheEnvironment) {
  auto server = Serve();
  KubeApiOptions o = Options(*server);
  o.api_url.clear();
  ::setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", std::to_string(server->port()).c_str(), 1);
  Status st = LabelNode(o, "worker-1");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_OK(st);
  EXPECT_EQ(server->requests().size(), 1u);

  Status outside = LabelNode(o, "worker-1");
  EXPECT_EQ(outside.code(), Code::kFailedPrecondition);
  EXPECT_NE(outside.message().find("KUBERNETES_SERVICE_HOST"), std::string::npos) << outside.message();
}

// --- The API's errors -------------------------------------------------------

TEST_F(NodeLabelTest, NotFoundNamesTheNodeAndTheApiMessage) {
  auto server = Serve();
  server->Answer(404, StatusBody(404, "NotFound", "nodes \"worker-1\" not found"));
  Status st = LabelNode(Options(*server), "worker-1");
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(st.message().find("label node \"worker-1\" capsule.io/runtime=true"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("HTTP 404"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("nodes \"worker-1\" not found (reason NotFound)"), std::string::npos) << st.message();
}

TEST_F(NodeLabelTest, ForbiddenNamesTheNodeAndTheApiMessage) {
  auto server = Serve();
  const std::string rbac =
      "nodes \"worker-1\" is forbidden: User \"system:serviceaccount:capsule-system:capsule-installer\" cannot "
      "patch resource \"nodes\" in API group \"\" at the cluster scope";
  server->Answer(403, StatusBody(403, "Forbidden", rbac));
  Status st = UnlabelNode(Options(*server), "worker-1");
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_NE(st.message().find("remove label capsule.io/runtime from node \"worker-1\""), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("HTTP 403"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(rbac), std::string::npos) << st.message();
}

TEST_F(NodeLabelTest, OversizedErrorBodyIsBounded) {
  auto server = Serve();
  std::string junk(8 << 20, 'x');
  for (size_t i = 0; i < junk.size(); i += 7) junk[i] = static_cast<char>(i % 256);
  server->Answer(403, junk, "application/octet-stream");
  Status st = LabelNode(Options(*server), "worker-1");
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_NE(st.message().find("worker-1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("HTTP 403"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("not read in full"), std::string::npos) << st.message();
  EXPECT_LT(st.message().size(), 600u);
  for (char c : st.message()) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "unprintable byte " << int(c);
}

TEST_F(NodeLabelTest, GarbageErrorBodyIsQuotedPrintableAndShort) {
  auto server = Serve();
  server->Answer(502, std::string("\x01\x02<html>bad gateway\r\n") + std::string(4000, '!'), "text/html");
  Status st = LabelNode(Options(*server), "worker-1");
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find("HTTP 502"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("not a Kubernetes Status: \"?" "?<html>bad gateway?" "?!!!"), std::string::npos)
      << st.message();
  EXPECT_LT(st.message().size(), 400u);
}

TEST(DescribeErrorBodyTest, StatusWithoutReasonAndEmptyBody) {
  EXPECT_EQ(DescribeErrorBody(R"({"kind":"Status","message":"boom"})", false), "boom");
  EXPECT_EQ(DescribeErrorBody("", false), "no response body");
  EXPECT_LT(DescribeErrorBody(std::string(100000, '['), false).size(), 200u);
}

// --- TLS -------------------------------------------------------------------

TEST_F(NodeLabelTest, ServerNotSignedByTheGivenCaIsRefused) {
  auto server = Serve("by-other");
  Status st = LabelNode(Options(*server), "worker-1");
  EXPECT_EQ(st.code(), Code::kUnauthenticated);
  EXPECT_NE(st.message().find("does not verify against CA file " + Path("ca.crt")), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("worker-1"), std::string::npos) << st.message();
  EXPECT_TRUE(server->requests().empty()) << "the token must not reach an unverified server";
}

TEST_F(NodeLabelTest, ServerCertificateForAnotherHostIsRefused) {
  auto server = Serve("elsewhere");
  Status st = LabelNode(Options(*server), "worker-1");
  EXPECT_EQ(st.code(), Code::kUnauthenticated);
  EXPECT_NE(st.message().find("does not name 127.0.0.1"), std::string::npos) << st.message();
  EXPECT_TRUE(server->requests().empty());
}

TEST_F(NodeLabelTest, PlainHttpIsRefusedBeforeAnyRequest) {
  auto server = Serve();
  KubeApiOptions o = Options(*server);
  o.api_url = "http://127.0.0.1:" + std::to_string(server->port());
  Status st = LabelNode(o, "worker-1");
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("not https://"), std::string::npos) << st.message();
  EXPECT_TRUE(server->requests().empty());
}

TEST_F(NodeLabelTest, CallOutlivingItsDeadlineIsStopped) {
  auto server = Serve();
  server->Hold();
  KubeApiOptions o = Options(*server);
  o.request_deadline_ms = 300;
  auto start = std::chrono::steady_clock::now();
  Status st = LabelNode(o, "worker-1");
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(st.code(), Code::kDeadlineExceeded) << st.ToString();
  EXPECT_LT(took, std::chrono::milliseconds(o.io_timeout_ms)) << "stopped by the read timeout, not the deadline";
}

// --- Inputs checked before any request ---------------------------------------

TEST_F(NodeLabelTest, BadNodeNameIsRefusedBeforeAnyRequest) {
  auto server = Serve();
  const std::string too_long(254, 'a');
  for (const std::string& name : {std::string(""), std::string("Worker-1"), std::string("worker_1"),
                                  std::string("-worker"), std::string("worker-"), std::string("a..b"),
                                  std::string(".a"), std::string("../../namespaces/x"), std::string("a/b"),
                                  std::string("a b"), std::string("a\nb"), std::string("a?x=1"), too_long}) {
    Status label = LabelNode(Options(*server), name);
    EXPECT_EQ(label.code(), Code::kInvalidArgument) << name;
    EXPECT_NE(label.message().find("DNS-1123"), std::string::npos) << label.message();
    EXPECT_EQ(UnlabelNode(Options(*server), name).code(), Code::kInvalidArgument) << name;
  }
  EXPECT_TRUE(server->requests().empty());
}

TEST(ValidateNodeNameTest, AcceptsDns1123Subdomains) {
  for (const std::string& name : {std::string("worker-1"), std::string("a"), std::string("0"),
                                  std::string("ip-10-0-0-7.eu-west-1.compute.internal"), std::string(253, 'a')}) {
    EXPECT_OK(ValidateNodeName(name)) << name;
  }
}

TEST_F(NodeLabelTest, MissingTokenOrCaFileIsNamed) {
  auto server = Serve();
  KubeApiOptions o = Options(*server);
  o.token_file = Path("no-token");
  Status st = LabelNode(o, "worker-1");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(Path("no-token")), std::string::npos) << st.message();

  o = Options(*server);
  ASSERT_OK(WriteFile(Path("empty-ca.crt"), "not a certificate\n"));
  o.ca_file = Path("empty-ca.crt");
  st = LabelNode(o, "worker-1");
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find(Path("empty-ca.crt")), std::string::npos) << st.message();
  EXPECT_TRUE(server->requests().empty());
}

}  // namespace
}  // namespace capsule::install
