#include "server/model_pool.h"

#include <malloc.h>

#include <algorithm>
#include <list>
#include <map>
#include <mutex>
#include <utility>

#include "core/error.h"
#include "core/memory_limits.h"
#include "model/kv_spec.h"
#include "server/api_error.h"

namespace minfer::server {

using Clock = std::chrono::steady_clock;

struct ModelPool::Slot {
    CatalogEntry entry;
    enum class State { Unloaded, Loading, Loaded } state = State::Unloaded;
    std::shared_ptr<ServedModel> model;
    std::shared_ptr<GenerationService> service;
    uint64_t bytes = 0;  // counted against the budget while loading (once known) and loaded
    int leases = 0;
    std::chrono::milliseconds keep_alive{0};
    std::optional<Clock::time_point> expires;  // idle and to be unloaded then
    Clock::time_point last_used = Clock::now();
    std::vector<std::pair<Ready, Failed>> waiters;  // while loading
    bool removed = false;                           // deleted: unloaded once idle, then dropped
};

struct ModelPool::Unloading {
    std::string id;
    std::shared_ptr<ServedModel> model;
    std::shared_ptr<GenerationService> service;
};

struct ModelLease::Shared {
    mutable std::mutex mutex;
    std::condition_variable changed;  // wakes the reaper
    ModelCatalog catalog;
    std::map<std::string, std::shared_ptr<ModelPool::Slot>, std::less<>> slots;  // by id
    bool stopping = false;
    std::atomic<bool> cancel{false};
    bool shut_down = false;
    struct LoadThread {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
    };
    std::list<LoadThread> loaders;
};

namespace {

// What loading this model adds to the process: its weights (mapped or copied) and its KV cache.
uint64_t bytes_of(const ServedModel& m) {
    const Model& model = *m.loaded.model;
    const int64_t tokens = m.engine.kv_tokens > 0 ? m.engine.kv_tokens : m.engine.n_ctx;
    const int64_t blocks = (tokens + kKvBlockSize - 1) / kKvBlockSize;
    return model.file().file_size() + model.kv_cache_spec(m.engine.kv_type, blocks).bytes();
}

}  // namespace

ModelLease::ModelLease(std::shared_ptr<Shared> shared, std::string id,
                       std::shared_ptr<ServedModel> model,
                       std::shared_ptr<GenerationService> service)
    : shared_(std::move(shared)),
      id_(std::move(id)),
      model_(std::move(model)),
      service_(std::move(service)) {}

ModelLease::~ModelLease() {
    // Ours go first, while the pool still holds its own: once the count below reaches zero the
    // reaper may unload the model, and the last owner of a service must not be this thread,
    // which may be the service's own (a job's listener ends there).
    service_.reset();
    model_.reset();
    {
        std::lock_guard lock(shared_->mutex);
        const auto it = shared_->slots.find(id_);
        if (it == shared_->slots.end()) return;
        ModelPool::Slot& slot = *it->second;
        slot.last_used = Clock::now();
        if (--slot.leases == 0 && slot.keep_alive.count() >= 0)
            slot.expires = slot.last_used + slot.keep_alive;
    }
    shared_->changed.notify_all();
}

ModelPool::ModelPool(ModelCatalog catalog, PoolLimits limits, ServiceOptions service,
                     Loader load, Log log)
    : shared_(std::make_shared<ModelLease::Shared>()),
      limits_(limits),
      service_options_(service),
      load_(std::move(load)),
      log_(std::move(log)) {
    for (const CatalogEntry& e : catalog.entries()) {
        auto slot = std::make_shared<Slot>();
        slot->entry = e;
        slot->keep_alive = limits_.keep_alive;
        shared_->slots.emplace(e.id, std::move(slot));
    }
    shared_->catalog = std::move(catalog);
    reaper_ = std::thread([this] { reap(); });
}

ModelPool::~ModelPool() {
    shutdown(std::chrono::milliseconds(0));
    reaper_.join();
    std::vector<Unloading> rest;
    {
        std::lock_guard lock(shared_->mutex);
        for (auto& [id, slot] : shared_->slots) {
            if (slot->state == Slot::State::Loaded)
                rest.push_back({id, std::move(slot->model), std::move(slot->service)});
            slot->state = Slot::State::Unloaded;
        }
    }
    rest.clear();  // services join their threads here, outside the lock
}

std::optional<std::string> ModelPool::find(std::string_view name) const {
    std::lock_guard lock(shared_->mutex);
    if (const CatalogEntry* e = shared_->catalog.find(name)) return e->id;
    return std::nullopt;
}

std::shared_ptr<ModelLease> ModelPool::lease_locked(Slot& slot) {
    ++slot.leases;
    slot.expires.reset();
    slot.last_used = Clock::now();
    return std::shared_ptr<ModelLease>(
        new ModelLease(shared_, slot.entry.id, slot.model, slot.service));
}

void ModelPool::acquire(const std::string& id, std::optional<std::chrono::milliseconds> keep_alive,
                        Ready ready, Failed failed) {
    std::unique_lock lock(shared_->mutex);
    if (shared_->stopping) throw ApiError(503, "the server is shutting down");
    const auto it = shared_->slots.find(id);
    if (it == shared_->slots.end() || it->second->removed)
        throw ApiError(404, concat("model '", id, "' not found"), "", "model_not_found");
    const std::shared_ptr<Slot> slot = it->second;
    // ollama's semantics: each request sets it, to the server's default when it names none.
    slot->keep_alive = keep_alive.value_or(limits_.keep_alive);
    switch (slot->state) {
    case Slot::State::Loaded: {
        auto lease = lease_locked(*slot);
        lock.unlock();
        ready(std::move(lease));
        return;
    }
    case Slot::State::Loading:
        slot->waiters.emplace_back(std::move(ready), std::move(failed));
        return;
    case Slot::State::Unloaded:
        slot->state = Slot::State::Loading;
        slot->waiters.emplace_back(std::move(ready), std::move(failed));
        auto& loader = shared_->loaders.emplace_back();
        loader.thread = std::thread([this, slot, entry = slot->entry, done = loader.done] {
            load(slot, entry);
            *done = true;
            shared_->changed.notify_all();  // the reaper joins this thread
        });
        return;
    }
}

// Chooses the models to unload so that `slot` (needing `bytes`) fits, and takes them out of the
// pool; throws ApiError when the models in use leave no room. Under the lock.
std::vector<ModelPool::Unloading> ModelPool::make_room(Slot& slot, uint64_t bytes) {
    const uint64_t budget = limits_.memory_bytes;
    if (budget > 0 && bytes > budget) {
        throw ApiError(500, concat("model '", slot.entry.id, "' needs ", format_bytes(bytes),
                                   " (weights and KV cache), more than the server's --memory of ",
                                   format_bytes(budget)));
    }
    uint64_t used = 0;
    int count = 0;
    for (const auto& [id, s] : shared_->slots) {
        if (s.get() == &slot || s->state == Slot::State::Unloaded) continue;
        used += s->bytes;
        ++count;
    }
    std::vector<Unloading> out;
    while ((budget > 0 && used + bytes > budget) || count + 1 > limits_.max_models) {
        Slot* victim = nullptr;
        for (const auto& [id, s] : shared_->slots) {
            if (s->state != Slot::State::Loaded || s->leases > 0) continue;
            if (victim == nullptr || s->last_used < victim->last_used) victim = s.get();
        }
        if (victim == nullptr) {
            std::string in_use;
            for (const auto& [id, s] : shared_->slots) {
                if (s.get() != &slot && s->state != Slot::State::Unloaded)
                    in_use += concat(in_use.empty() ? "" : ", ", id);
            }
            throw ApiError(503, concat("no room to load '", slot.entry.id, "' (",
                                       format_bytes(bytes), "): the models in use (", in_use,
                                       ") hold ", count, " of --max-models ", limits_.max_models,
                                       budget > 0 ? concat(" and ", format_bytes(used), " of --memory ",
                                                           format_bytes(budget))
                                                  : std::string(),
                                       "; retry when one is idle"));
        }
        used -= victim->bytes;
        --count;
        out.push_back({victim->entry.id, std::move(victim->model), std::move(victim->service)});
        victim->state = Slot::State::Unloaded;
        victim->bytes = 0;
        victim->expires.reset();
    }
    slot.bytes = bytes;
    return out;
}

void ModelPool::load(const std::shared_ptr<Slot>& slot, const CatalogEntry& entry) {
    std::vector<std::pair<Ready, Failed>> waiters;
    std::exception_ptr error;
    try {
        auto model = std::make_shared<ServedModel>(load_(entry, shared_->cancel));
        // Built now rather than by the first request that constrains its answer.
        model->loaded.grammar_vocabulary();
        const uint64_t model_bytes = bytes_of(*model);
        std::vector<Unloading> victims;
        {
            std::lock_guard lock(shared_->mutex);
            if (shared_->stopping) throw ApiError(503, "the server is shutting down");
            victims = make_room(*slot, model_bytes);
        }
        unload(std::move(victims), concat("to make room for '", entry.id, "'"));
        ServiceOptions service_options = service_options_;
        if (model->n_parallel > 0) service_options.n_parallel = model->n_parallel;
        model->n_parallel = service_options.n_parallel;
        auto service = std::make_shared<GenerationService>(
            [&] {
                return std::make_unique<Engine>(model->loaded.model, model->loaded.tokenizer,
                                                model->engine);
            },
            service_options);
        std::vector<std::shared_ptr<ModelLease>> leases;
        {
            std::lock_guard lock(shared_->mutex);
            slot->model = model;
            slot->service = std::move(service);
            slot->state = Slot::State::Loaded;
            waiters = std::move(slot->waiters);
            slot->waiters.clear();
            for (std::size_t i = 0; i < waiters.size(); ++i) leases.push_back(lease_locked(*slot));
            if (waiters.empty() && slot->keep_alive.count() >= 0)
                slot->expires = Clock::now() + slot->keep_alive;
        }
        log_(concat("minfer: '", entry.id, "' is ready (", format_bytes(model_bytes),
                    " with its KV cache)"));
        for (std::size_t i = 0; i < waiters.size(); ++i) {
            try {
                waiters[i].first(std::move(leases[i]));
            } catch (...) {
                waiters[i].second(std::current_exception());
            }
        }
        return;
    } catch (...) {
        error = std::current_exception();
    }
    {
        std::lock_guard lock(shared_->mutex);
        slot->state = Slot::State::Unloaded;
        slot->bytes = 0;
        waiters = std::move(slot->waiters);
        slot->waiters.clear();
    }
    try {
        std::rethrow_exception(error);
    } catch (const std::exception& e) {
        log_(concat("minfer: '", entry.id, "' not loaded: ", e.what()));
    }
    for (auto& w : waiters) w.second(error);
}

void ModelPool::unload(std::vector<Unloading> models, std::string_view why) {
    if (models.empty()) return;
    for (Unloading& m : models) {
        m.service.reset();  // cancels nothing (the model was idle) and joins the engine's thread
        m.model.reset();
        log_(concat("minfer: unloaded '", m.id, "' ", why));
    }
    malloc_trim(0);  // give the freed weights and caches back to the system
}

void ModelPool::unload_when_idle(const std::string& id) {
    {
        std::lock_guard lock(shared_->mutex);
        const auto it = shared_->slots.find(id);
        if (it == shared_->slots.end()) return;
        Slot& slot = *it->second;
        slot.keep_alive = std::chrono::milliseconds(0);
        if (slot.state == Slot::State::Loaded && slot.leases == 0) slot.expires = Clock::now();
    }
    shared_->changed.notify_all();
}

// The reaper's thread: unloads idle models whose keep-alive has passed, drops deleted ones once
// unloaded, and joins finished loading threads.
void ModelPool::reap() {
    std::unique_lock lock(shared_->mutex);
    while (!shared_->stopping) {
        const auto now = Clock::now();
        std::vector<Unloading> expired;
        std::optional<Clock::time_point> next;
        for (auto it = shared_->slots.begin(); it != shared_->slots.end();) {
            Slot& s = *it->second;
            if (s.state == Slot::State::Loaded && s.leases == 0 && s.expires) {
                if (*s.expires <= now) {
                    expired.push_back({s.entry.id, std::move(s.model), std::move(s.service)});
                    s.state = Slot::State::Unloaded;
                    s.bytes = 0;
                    s.expires.reset();
                } else if (!next || *s.expires < *next) {
                    next = s.expires;
                }
            }
            if (s.removed && s.state == Slot::State::Unloaded && s.waiters.empty())
                it = shared_->slots.erase(it);
            else
                ++it;
        }
        if (!expired.empty()) {
            lock.unlock();
            unload(std::move(expired), "(idle for its keep-alive)");
            lock.lock();
            continue;
        }
        // Loading threads that have ended.
        std::list<ModelLease::Shared::LoadThread> ended;
        for (auto it = shared_->loaders.begin(); it != shared_->loaders.end();) {
            const auto here = it++;
            if (*here->done) ended.splice(ended.end(), shared_->loaders, here);
        }
        if (!ended.empty()) {
            lock.unlock();
            for (auto& t : ended) t.thread.join();
            lock.lock();
            continue;
        }
        if (next)
            shared_->changed.wait_until(lock, *next);
        else
            shared_->changed.wait(lock);
    }
}

std::string ModelPool::add(CatalogEntry entry) {
    std::string note, id;
    {
        std::lock_guard lock(shared_->mutex);
        id = shared_->catalog.add(entry, &note);
        auto& slot = shared_->slots[id];
        const bool fresh = slot == nullptr;
        if (fresh) slot = std::make_shared<Slot>();
        if (fresh || slot->removed) {
            // New, or deleted and pulled again (while still loaded: it is kept).
            slot->removed = false;
            slot->keep_alive = limits_.keep_alive;
            slot->expires.reset();
        }
        // (The file of a model not loaded may have come since: downloaded.)
        if (fresh || slot->state == Slot::State::Unloaded) slot->entry = *shared_->catalog.find_id(id);
    }
    if (!note.empty()) log_(concat("minfer: ", note));
    return id;
}

void ModelPool::remove(const std::string& id) {
    {
        std::lock_guard lock(shared_->mutex);
        shared_->catalog.remove(id);
        const auto it = shared_->slots.find(id);
        if (it == shared_->slots.end()) return;
        Slot& slot = *it->second;
        slot.removed = true;
        slot.keep_alive = std::chrono::milliseconds(0);
        if (slot.leases == 0) slot.expires = Clock::now();
    }
    shared_->changed.notify_all();
}

void ModelPool::sync_cached(const std::vector<CatalogEntry>& cached) {
    std::vector<std::string> gone;
    {
        std::lock_guard lock(shared_->mutex);
        for (const CatalogEntry& e : shared_->catalog.entries()) {
            if (!e.in_cache) continue;
            const bool still = std::any_of(cached.begin(), cached.end(), [&](const CatalogEntry& c) {
                return c.reference == e.reference;
            });
            if (!still) gone.push_back(e.id);
        }
    }
    for (const std::string& id : gone) remove(id);
    for (const CatalogEntry& e : cached) add(e);
}

std::vector<CatalogEntry> ModelPool::entries() const {
    std::lock_guard lock(shared_->mutex);
    return shared_->catalog.entries();
}

std::vector<LoadedModelStatus> ModelPool::loaded() const {
    std::lock_guard lock(shared_->mutex);
    const auto now = Clock::now();
    const auto wall = std::chrono::system_clock::now();
    std::vector<LoadedModelStatus> out;
    for (const auto& [id, s] : shared_->slots) {
        if (s->state != Slot::State::Loaded) continue;
        LoadedModelStatus st;
        st.id = id;
        st.model = s->model;
        st.n_ctx = s->service->n_ctx();
        st.n_parallel = s->model->n_parallel;
        st.bytes = s->bytes;
        st.leases = s->leases;
        st.keep_alive = s->keep_alive;
        if (s->expires)
            st.expires = wall + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                    *s->expires - now);
        out.push_back(std::move(st));
    }
    return out;
}

ServiceCounters ModelPool::counters() const {
    std::lock_guard lock(shared_->mutex);
    ServiceCounters sum;
    for (const auto& [id, s] : shared_->slots) {
        if (s->state != Slot::State::Loaded) continue;
        const ServiceCounters c = s->service->counters();
        sum.running_sequences += c.running_sequences;
        sum.queued_jobs += c.queued_jobs;
        sum.kv_blocks_used += c.kv_blocks_used;
        sum.kv_blocks_total += c.kv_blocks_total;
        sum.prefix_hit_tokens += c.prefix_hit_tokens;
    }
    return sum;
}

void ModelPool::shutdown(std::chrono::milliseconds grace) {
    std::list<ModelLease::Shared::LoadThread> loaders;
    std::vector<std::shared_ptr<GenerationService>> services;
    {
        std::lock_guard lock(shared_->mutex);
        if (std::exchange(shared_->shut_down, true)) return;
        shared_->stopping = true;
        shared_->cancel = true;
        loaders = std::move(shared_->loaders);
        shared_->loaders.clear();
    }
    shared_->changed.notify_all();
    for (auto& t : loaders) t.thread.join();
    {
        std::lock_guard lock(shared_->mutex);
        for (const auto& [id, s] : shared_->slots) {
            if (s->state == Slot::State::Loaded) services.push_back(s->service);
        }
    }
    const auto deadline = Clock::now() + grace;
    for (const auto& service : services) {
        service->shutdown(std::max(std::chrono::milliseconds(0),
                                   std::chrono::duration_cast<std::chrono::milliseconds>(
                                       deadline - Clock::now())));
    }
}

}  // namespace minfer::server
