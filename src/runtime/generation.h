#pragma once
// One sequence through the engine from submission to its end, for front ends that serve one
// answer at a time (run, chat, score): steps the engine, streams the sequence's text, cancels it
// when `interrupt` becomes true.

#include <atomic>
#include <functional>
#include <string_view>

#include "engine/engine.h"

namespace minfer {

struct Generation {
    SeqId id;  // still known to the engine (release it, or continue it if kept)
    SequenceResult result;
};

Generation generate(Engine& engine, SequenceParams params,
                    const std::function<void(std::string_view text)>& on_text,
                    const std::atomic<bool>* interrupt = nullptr);

}  // namespace minfer
