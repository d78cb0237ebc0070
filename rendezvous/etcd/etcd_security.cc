#include "rendezvous/etcd/etcd_security.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rendezvous/etcd/etcd_errors.h"

namespace muster::rdzv::etcd {

bool IsPermanentEtcdError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
      return true;
    default:
      return false;
  }
}

std::string TlsHint(const EtcdSecurity& security) {
  if (!security.tls || !security.cert_pem.empty()) return "";
  return " (over TLS without a client certificate: if etcd runs with --client-cert-auth, give "
         "--rdzv-conf cert=PATH,key=PATH)";
}

namespace {

// gRPC reports a failed TLS handshake as Unavailable, as it does a member that is down;
// these words (BoringSSL's and OpenSSL's reasons) mean the certificates or the protocol
// are wrong, which no retry mends.
bool IsTlsRefusal(const std::string& message) {
  const std::string lower = absl::AsciiStrToLower(message);
  return absl::StrContains(lower, "certificate") ||
         absl::StrContains(lower, "wrong_version_number") ||
         absl::StrContains(lower, "unknown_ca") || absl::StrContains(lower, "tls: ");
}

}  // namespace

absl::Status ExplainEtcdError(const absl::Status& status) {
  const std::string message(status.message());
  if (absl::IsUnavailable(status) && IsTlsRefusal(message)) {
    return absl::FailedPreconditionError(absl::StrCat(
        message,
        " (TLS to etcd failed: check --rdzv-conf protocol=https, cacert (the CA that signed "
        "etcd's certificate, for the endpoint's host name), cert and key (when etcd runs with "
        "--client-cert-auth))"));
  }
  if (absl::StrContains(message, "user name is empty")) {
    return absl::UnauthenticatedError(
        absl::StrCat(message,
                     " (etcd has authentication on: give --rdzv-conf "
                     "username=NAME,password_file=PATH, or MUSTER_ETCD_PASSWORD)"));
  }
  if (absl::StrContains(message, "authentication failed")) {
    return absl::UnauthenticatedError(
        absl::StrCat(message,
                     " (check --rdzv-conf username and the password in password_file "
                     "or MUSTER_ETCD_PASSWORD)"));
  }
  if (absl::IsPermissionDenied(status)) {
    return absl::PermissionDeniedError(absl::StrCat(
        message, " (the etcd user needs a role with readwrite on the keys under etcd_prefix)"));
  }
  return status;
}

}  // namespace muster::rdzv::etcd
