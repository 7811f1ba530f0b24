#pragma once
// Why a sequence ended.

namespace minfer {

enum class StopReason {
    EndOfGeneration,  // "eog": the model's end-of-generation token
    StopString,       // "stop": a stop string appeared
    MaxTokens,        // "length": n_predict tokens
    ContextFull,      // "context": the sequence reached n_ctx positions
    CacheFull,        // "cache": the KV pool cannot hold the sequence even alone
    Cancelled,        // "interrupted": cancel() (Ctrl-C, a client that went away)
    PromptDone,       // "prompt": a sequence that only evaluates its prompt (score) is done
    NoAllowedToken,   // "no-token": no token may come next under the grammar (the logit bias bans
                      // the ones it allows, no token spells what it needs, or it hit its limits)
};

// The quoted names above, as the command line and the server's logs print them.
const char* stop_reason_name(StopReason reason);

}  // namespace minfer
