#include "runtime/generation.h"

namespace minfer {

Generation generate(Engine& engine, SequenceParams params,
                    const std::function<void(std::string_view)>& on_text,
                    const std::atomic<bool>* interrupt) {
    const SeqId id = engine.submit(std::move(params));
    bool done = false;
    while (!done) {
        if (interrupt != nullptr && interrupt->load()) engine.cancel(id);
        for (const SequenceEvent& e : engine.step()) {
            if (e.id != id) continue;
            if (on_text && !e.text.empty()) on_text(e.text);
            done = done || e.finished;
        }
    }
    return Generation{id, engine.result(id)};
}

}  // namespace minfer
