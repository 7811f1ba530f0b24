#include "engine/stop_reason.h"

namespace minfer {

const char* stop_reason_name(StopReason reason) {
    switch (reason) {
        case StopReason::EndOfGeneration:
            return "eog";
        case StopReason::StopString:
            return "stop";
        case StopReason::MaxTokens:
            return "length";
        case StopReason::ContextFull:
            return "context";
        case StopReason::CacheFull:
            return "cache";
        case StopReason::Cancelled:
            return "interrupted";
        case StopReason::PromptDone:
            return "prompt";
        case StopReason::NoAllowedToken:
            return "no-token";
    }
    return "?";
}

}  // namespace minfer
