#include "server/session_memory.h"

#include <fmt/format.h>

#include <algorithm>

#include "adaptive/policy.h"
#include "payload/verifier.h"
#include "util/size.h"

namespace iobench {

SessionMemory session_memory(const SidePlan& plan, const proto::Hello& h) {
  const DataPhase& d = plan.data;
  // Adaptive: the buffer follows the live count up to --buf-max.
  const uint64_t largest =
      h.adaptive ? std::max(d.buf_bytes, h.buf_max ? h.buf_max : PolicyLimits{}.max) : d.buf_bytes;
  const EngineMemory e = engine_memory(plan.engine, plan.engine_options, largest, d.is_sender,
                                       parse_name<Proto>(h.proto) == Proto::kTls);
  SessionMemory m;
  m.buffers = e.bytes;
  m.what = e.what;
  if (d.is_sender && plan.engine_options.fixed_buffers) m.copies = d.bytes;
  // The decoder's window is bounded (kDecodeWindowLog) before it reads a frame: counted at
  // that bound, whatever window the stream's frames declare.
  if (!d.is_sender && d.decompress) m.decoder = decoder_memory();
  // Post-authentication frames are RESULT or ERROR (recv_message's bound for them).
  m.frames = proto::kHeaderBytes + proto::kMaxBodyBytes;
  return m;
}

Result<MemoryBudget::Hold> take_session_memory(const SessionMemory& m, const ServerOptions& o,
                                               MemoryBudget& budget) {
  if (m.buffers + m.decoder > o.session_memory)
    return fail(fmt::format("this session's buffers need {} ({}{}), past this server's "
                            "--session-memory {}",
                            format_bytes_human(m.buffers + m.decoder), m.what,
                            m.decoder ? fmt::format(", a zstd decoder: {}",
                                                    format_bytes_human(m.decoder))
                                      : "",
                            format_bytes_human(o.session_memory)));
  if (auto hold = budget.take(m.total())) return std::move(*hold);
  return fail(fmt::format("server's memory full: sessions hold {} of its --memory-budget {}, this "
                          "session needs {} (try again when a session ends)",
                          format_bytes_human(budget.held()), format_bytes_human(budget.limit()),
                          format_bytes_human(m.total())),
              ErrorKind::kFull);
}

}  // namespace iobench
