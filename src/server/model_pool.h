#pragma once
// The models a server has loaded, within its limits. A request names a model; the pool hands it a
// lease once the model is loaded, loading it first on a thread of its own (requests for that
// model wait, requests for the others go on being served). A model stays loaded while leases
// on it are held and for its keep-alive after the last one ends; when loading one more would
// exceed the count (--max-models) or the memory budget (--memory: its weights and its KV cache),
// the least recently used idle model is unloaded first. Each loaded model has its own
// GenerationService (sequences, KV cache); their engines share the process's thread pool, which
// takes their forward passes in turn.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "server/generation_service.h"
#include "server/model_catalog.h"
#include "runtime/loaded_model.h"

namespace minfer::server {

// What a server serves of one model: the model, its tokenizer and template, and the options its
// engine is made with (the engine itself is made on its generation service's thread).
struct ServedModel {
    LoadedModel loaded;
    EngineOptions engine;
    int n_parallel = 0;  // sequences decoded at once; 0: the pool's
};

struct PoolLimits {
    int max_models = 3;
    uint64_t memory_bytes = 0;  // what loaded models may add, in all; 0: no limit
    // How long a model stays loaded after its last request (negative: until the server stops).
    std::chrono::milliseconds keep_alive = std::chrono::minutes(5);
};

// Held while a request uses a model (by the request's job, until it ends): the model is not
// unloaded while any lease on it lives.
class ModelLease {
  public:
    ~ModelLease();
    ModelLease(const ModelLease&) = delete;
    ModelLease& operator=(const ModelLease&) = delete;
    const std::string& id() const { return id_; }
    const ServedModel& model() const { return *model_; }
    const std::shared_ptr<GenerationService>& service() const { return service_; }

  private:
    friend class ModelPool;
    struct Shared;
    ModelLease(std::shared_ptr<Shared> shared, std::string id, std::shared_ptr<ServedModel> model,
               std::shared_ptr<GenerationService> service);
    std::shared_ptr<Shared> shared_;
    std::string id_;
    std::shared_ptr<ServedModel> model_;
    std::shared_ptr<GenerationService> service_;
};

struct LoadedModelStatus {
    std::string id;
    std::shared_ptr<const ServedModel> model;
    int64_t n_ctx = 0;
    int n_parallel = 0;
    uint64_t bytes = 0;  // counted against --memory
    int leases = 0;      // requests using it now
    std::chrono::milliseconds keep_alive{0};  // after the last request (negative: forever)
    // When it will be unloaded if no request comes (nullopt: not while the server runs, or in
    // use now).
    std::optional<std::chrono::system_clock::time_point> expires;
};

class ModelPool {
  public:
    // Loads a model (reading it, or downloading it when its reference is not in the cache);
    // `cancel` is set when the server shuts down.
    using Loader = std::function<ServedModel(const CatalogEntry&, const std::atomic<bool>& cancel)>;
    using Ready = std::function<void(std::shared_ptr<ModelLease>)>;
    using Failed = std::function<void(std::exception_ptr)>;
    using Log = std::function<void(const std::string&)>;

    ModelPool(ModelCatalog catalog, PoolLimits limits, ServiceOptions service, Loader load,
              Log log);
    ~ModelPool();  // shuts down at once (when shutdown() was not called) and unloads everything
    ModelPool(const ModelPool&) = delete;
    ModelPool& operator=(const ModelPool&) = delete;

    // The id of the model a client's name means (ModelCatalog::find), nullopt when none.
    std::optional<std::string> find(std::string_view name) const;
    // Calls `ready` once with a lease on model `id`: at once on this thread when it is loaded,
    // else on the thread that loads it, where `failed` is called instead when loading fails
    // (ApiError 503 when the models in use leave no room for it, 500 when it can never fit,
    // what the loader threw otherwise). The model's keep-alive becomes `keep_alive`, or the
    // pool's when not given (ollama's semantics: the last request's counts). Throws ApiError 404
    // for an unknown id, 503 after shutdown().
    void acquire(const std::string& id, std::optional<std::chrono::milliseconds> keep_alive,
                 Ready ready, Failed failed);
    // ollama's keep_alive 0 without a prompt: the model is unloaded once no request uses it.
    void unload_when_idle(const std::string& id);

    // Adds a model (a pull) and returns its id; when its id had to be suffixed, says so in the log.
    std::string add(CatalogEntry entry);
    // Removes a model from the catalogue (a delete): it is unloaded once no request uses it.
    void remove(const std::string& id);
    // Makes the catalogue's cached models those given (what the caches hold now): adds the new
    // ones, drops those gone that are not loaded.
    void sync_cached(const std::vector<CatalogEntry>& cached);

    std::vector<CatalogEntry> entries() const;
    std::vector<LoadedModelStatus> loaded() const;
    ServiceCounters counters() const;  // summed over the loaded models

    // Takes no more requests; cancels loads; lets running requests finish for up to `grace`,
    // then ends them; returns when every model's service has stopped.
    void shutdown(std::chrono::milliseconds grace);

  private:
    friend class ModelLease;
    struct Slot;
    struct Unloading;
    using Clock = std::chrono::steady_clock;
    void load(const std::shared_ptr<Slot>& slot, const CatalogEntry& entry);
    std::vector<Unloading> make_room(Slot& slot, uint64_t bytes);
    void unload(std::vector<Unloading> models, std::string_view why);
    void reap();
    std::shared_ptr<ModelLease> lease_locked(Slot& slot);

    std::shared_ptr<ModelLease::Shared> shared_;
    PoolLimits limits_;
    ServiceOptions service_options_;
    Loader load_;
    Log log_;
    std::thread reaper_;
};

}  // namespace minfer::server
