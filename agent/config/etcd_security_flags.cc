#include "agent/config/etcd_security_flags.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/config/flag_parsers.h"
#include "base/status_macros.h"
#include "base/wire_values.h"

namespace muster {
namespace {

// The source recorded for `key` (e.g. "--rdzv-conf cacert"), for errors after parsing.
std::string EtcdKeySource(const Config& c, const std::string& key) {
  auto it = c.sources.find("etcd-" + key);
  return it == c.sources.end() ? "--rdzv-conf " + key : it->second;
}

// The whole of `path` into *text; an error names `key` (its source) and the path.
absl::Status ReadEtcdKeyFile(const Config& c, const std::string& key, const std::string& path,
                             std::string* text) {
  std::ifstream in(path);
  if (!in) {
    return FlagError(EtcdKeySource(c, key),
                     absl::StrCat("cannot read '", EscapeForMessage(path), "': ", strerror(errno)));
  }
  std::stringstream all;
  all << in.rdbuf();
  *text = all.str();
  return absl::OkStatus();
}

absl::Status ReadEtcdPem(const Config& c, const std::string& key, const std::string& path,
                         std::string* pem) {
  if (path.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(ReadEtcdKeyFile(c, key, path, pem));
  if (!absl::StrContains(*pem, "-----BEGIN ")) {
    return FlagError(EtcdKeySource(c, key),
                     absl::StrCat("'", EscapeForMessage(path),
                                  "' holds no PEM block (-----BEGIN ...): give the ",
                                  key == "key" ? "private key" : "certificate", " in PEM form"));
  }
  return absl::OkStatus();
}

absl::Status ReadEtcdPassword(const std::map<std::string, std::string>& env, Config* c) {
  EtcdAccess& a = c->etcd_access;
  if (!a.password_file.empty()) {
    if (a.username.empty()) {
      return FlagError(EtcdKeySource(*c, "password_file"), "needs username=NAME (the etcd user)");
    }
    RETURN_IF_ERROR(ReadEtcdKeyFile(*c, "password_file", a.password_file, &a.password));
    a.password = std::string(absl::StripTrailingAsciiWhitespace(a.password));
    if (a.password.empty()) {
      return FlagError(EtcdKeySource(*c, "password_file"),
                       absl::StrCat("'", EscapeForMessage(a.password_file), "' is empty"));
    }
    return absl::OkStatus();
  }
  if (a.username.empty()) return absl::OkStatus();
  auto it = env.find("MUSTER_ETCD_PASSWORD");
  if (it == env.end() || it->second.empty()) {
    return FlagError(EtcdKeySource(*c, "username"),
                     "needs the user's password: password_file=PATH (a file holding it) or "
                     "MUSTER_ETCD_PASSWORD in the environment (never on the command line)");
  }
  a.password = it->second;
  return absl::OkStatus();
}

}  // namespace

std::optional<absl::Status> ApplyEtcdSecurityKey(const std::string& where, const std::string& key,
                                                 const std::string& value, Config* c) {
  EtcdAccess& a = c->etcd_access;
  std::string* path = nullptr;
  std::string name = key;  // torch's etcd backend's name for the key
  if (key == "protocol") {
    std::string protocol = absl::AsciiStrToLower(value);
    if (protocol != "http" && protocol != "https") {
      return FlagError(where, absl::StrCat("protocol: '", EscapeForMessage(value),
                                           "' must be http or https (etcd over TLS)"));
    }
    a.tls = protocol == "https";
    c->sources["etcd-protocol"] = absl::StrCat(where, " protocol");
    return absl::OkStatus();
  }
  if (key == "cacert" || key == "ca_cert") {
    path = &a.cacert;
    name = "cacert";
  } else if (key == "cert" || key == "ssl_cert") {
    path = &a.cert;
    name = "cert";
  } else if (key == "key" || key == "ssl_cert_key") {
    path = &a.key;
    name = "key";
  } else if (key == "username") {
    path = &a.username;
  } else if (key == "password_file") {
    path = &a.password_file;
  } else if (key == "password") {
    return FlagError(where,
                     "password: a password on the command line is visible to every user of the "
                     "machine; put it in a file (password_file=PATH) or in MUSTER_ETCD_PASSWORD");
  } else {
    return std::nullopt;
  }
  *path = value;
  c->sources["etcd-" + name] = absl::StrCat(where, " ", key);
  return absl::OkStatus();
}

absl::Status FinishEtcdSecurity(const std::map<std::string, std::string>& env, Config* c) {
  EtcdAccess& a = c->etcd_access;
  const bool tls_files = !a.cacert.empty() || !a.cert.empty() || !a.key.empty();
  const bool user = !a.username.empty() || !a.password_file.empty();
  if (!a.tls && !tls_files && !user) return absl::OkStatus();
  if (c->rdzv_backend != rdzv::Backend::kEtcd) {
    const char* first = a.tls                 ? "protocol"
                        : !a.cacert.empty()   ? "cacert"
                        : !a.cert.empty()     ? "cert"
                        : !a.key.empty()      ? "key"
                        : !a.username.empty() ? "username"
                                              : "password_file";
    return FlagError(EtcdKeySource(*c, first),
                     "is for --rdzv-backend etcd; muster's own rendezvous takes --tls-cert and "
                     "--tls-key (and --token-file)");
  }
  if (tls_files && !a.tls) {
    return FlagError(EtcdKeySource(*c, !a.cacert.empty() ? "cacert"
                                       : !a.cert.empty() ? "cert"
                                                         : "key"),
                     "is for etcd over TLS: add protocol=https to --rdzv-conf");
  }
  if (a.cert.empty() != a.key.empty()) {
    return FlagError(EtcdKeySource(*c, a.cert.empty() ? "key" : "cert"),
                     "give both cert=PATH and key=PATH (the client certificate and its private "
                     "key), or neither");
  }
  RETURN_IF_ERROR(ReadEtcdPem(*c, "cacert", a.cacert, &a.ca_pem));
  RETURN_IF_ERROR(ReadEtcdPem(*c, "cert", a.cert, &a.cert_pem));
  RETURN_IF_ERROR(ReadEtcdPem(*c, "key", a.key, &a.key_pem));
  return ReadEtcdPassword(env, c);
}

rdzv::etcd::EtcdSecurity EtcdSecurityOf(const EtcdAccess& a) {
  return {.tls = a.tls,
          .ca_pem = a.ca_pem,
          .cert_pem = a.cert_pem,
          .key_pem = a.key_pem,
          .username = a.username,
          .password = a.password};
}

}  // namespace muster
