#include "rendezvous/wire/wire_test_util.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

namespace muster::rdzv::wire::wire_test {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::OneofDescriptor;
using google::protobuf::Reflection;

void CollectUnset(const Message& m, const std::string& prefix, std::set<std::string>* out) {
  const Descriptor* d = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  // The real oneofs come first among oneof_decl (proto3 optional's synthetic ones last).
  for (int i = 0; i < d->real_oneof_decl_count(); ++i) {
    const OneofDescriptor* oneof = d->oneof_decl(i);
    if (!r->HasOneof(m, oneof)) out->insert(prefix + oneof->name());
  }
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string path = prefix + f->name();
    // A oneof's members other than the one set are not expected to be set.
    if (f->real_containing_oneof() != nullptr && !r->HasField(m, f)) continue;
    if (f->is_repeated()) {
      const int n = r->FieldSize(m, f);
      if (n < 2) out->insert(path + "[<2]");
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        for (int j = 0; j < n; ++j) CollectUnset(r->GetRepeatedMessage(m, f, j), path + ".", out);
      }
      continue;
    }
    // proto3 scalars without presence: HasField is "not the default value".
    if (!r->HasField(m, f)) {
      out->insert(path);
      continue;
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      CollectUnset(r->GetMessage(m, f), path + ".", out);
    }
  }
}

}  // namespace

std::set<std::string> UnsetFields(const Message& m) {
  std::set<std::string> out;
  CollectUnset(m, "", &out);
  return out;
}

TracesSummary FullTracesSummary(Distinct& d) {
  return TracesSummary{.round = d.Int(),
                       .location = d.Str("location"),
                       .nodes = d.Int(),
                       .files = d.Int(),
                       .nodes_reported = d.Int(),
                       .nodes_expected = d.Int(),
                       .error = d.Str("error"),
                       .left_on_nodes = {d.Str("left"), d.Str("left")}};
}

}  // namespace muster::rdzv::wire::wire_test
