// The pool of loaded models behind a server: loading on first use with every waiter served by one
// load, unloading the least recently used idle model beyond --max-models or --memory, refusing
// when every loaded model is in use, keep-alive, a model that fails to load, shutdown. Real
// fixture models, loaded and run by real engines.

#include "server/model_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <future>

#include "common/fixtures.h"
#include "core/error.h"
#include "server/api_error.h"

namespace minfer::server {
namespace {

using namespace std::chrono_literals;

constexpr const char* kModels[] = {"models/tiny-llama-q4_0.gguf", "models/tiny-qwen2-q8_0.gguf",
                                   "models/tiny-llama-q8_0.gguf"};

ServedModel load_entry(const CatalogEntry& e, const std::atomic<bool>&) {
    ServedModel m;
    m.loaded = load_model(e.reference);
    m.engine.n_ctx = 128;
    m.engine.kv_tokens = 256;
    m.engine.n_threads = 1;
    return m;
}

// What one acquire() ended with.
struct Outcome {
    std::promise<std::shared_ptr<ModelLease>> promise;
    std::future<std::shared_ptr<ModelLease>> future = promise.get_future();
};

std::shared_ptr<Outcome> acquire(ModelPool& pool, const std::string& id,
                                 std::optional<std::chrono::milliseconds> keep = std::nullopt) {
    auto o = std::make_shared<Outcome>();
    pool.acquire(
        id, keep, [o](std::shared_ptr<ModelLease> lease) { o->promise.set_value(std::move(lease)); },
        [o](std::exception_ptr e) { o->promise.set_exception(e); });
    return o;
}

std::shared_ptr<ModelLease> lease_of(ModelPool& pool, const std::string& id) {
    return acquire(pool, id)->future.get();
}

std::vector<std::string> loaded_ids(const ModelPool& pool) {
    std::vector<std::string> ids;
    for (const auto& m : pool.loaded()) ids.push_back(m.id);
    std::sort(ids.begin(), ids.end());
    return ids;
}

class ModelPoolTest : public ::testing::Test {
  protected:
    // A pool of the three fixture models (ids "tiny-llama-q4_0", "tiny-qwen2-q8_0",
    // "tiny-llama-q8_0"), plus `extra` entries.
    std::unique_ptr<ModelPool> make_pool(PoolLimits limits,
                                         std::vector<CatalogEntry> extra = {}) {
        ModelCatalog catalog;
        for (const char* m : kModels) {
            const auto path = test::fixture_path(m);
            if (!std::filesystem::exists(path)) return nullptr;
            CatalogEntry e;
            e.reference = path.string();
            e.file = path;
            catalog.add(e);
        }
        for (auto& e : extra) catalog.add(std::move(e));
        return std::make_unique<ModelPool>(std::move(catalog), limits, ServiceOptions{2, 8},
                                           load_entry, [](const std::string&) {});
    }
};

#define MINFER_REQUIRE_POOL(pool)                                                     \
    if (!(pool)) {                                                                    \
        if (test::in_ci()) FAIL() << "fixture models missing in CI";                  \
        GTEST_SKIP() << "fixture models missing (is ../shared beside the checkout?)"; \
    }

TEST_F(ModelPoolTest, LoadsOnFirstUseOnceForEveryoneWaiting) {
    auto pool = make_pool({});
    MINFER_REQUIRE_POOL(pool);
    EXPECT_TRUE(pool->loaded().empty());
    std::vector<std::shared_ptr<Outcome>> waiting;
    for (int i = 0; i < 4; ++i) waiting.push_back(acquire(*pool, "tiny-qwen2-q8_0"));
    std::vector<std::shared_ptr<ModelLease>> leases;
    for (auto& w : waiting) leases.push_back(w->future.get());
    for (auto& l : leases) EXPECT_EQ(&l->model(), &leases.front()->model());
    ASSERT_EQ(loaded_ids(*pool), std::vector<std::string>{"tiny-qwen2-q8_0"});
    EXPECT_EQ(pool->loaded().front().leases, 4);
    leases.clear();
    EXPECT_EQ(pool->loaded().front().leases, 0);
    EXPECT_EQ(pool->find("tiny-qwen2-q8_0:latest"), "tiny-qwen2-q8_0");
    EXPECT_THROW(acquire(*pool, "no-such-model"), ApiError);
}

TEST_F(ModelPoolTest, UnloadsTheLeastRecentlyUsedIdleModelBeyondMaxModels) {
    auto pool = make_pool({.max_models = 2, .memory_bytes = 0, .keep_alive = -1ms});
    MINFER_REQUIRE_POOL(pool);
    lease_of(*pool, "tiny-llama-q4_0");
    lease_of(*pool, "tiny-qwen2-q8_0");
    lease_of(*pool, "tiny-llama-q4_0");  // now tiny-qwen2-q8_0 is the least recently used
    auto lease = lease_of(*pool, "tiny-llama-q8_0");
    EXPECT_EQ(loaded_ids(*pool), (std::vector<std::string>{"tiny-llama-q4_0", "tiny-llama-q8_0"}));
    // A model in use is never unloaded, even as the least recently used: it serves on while the
    // idle one makes room.
    lease.reset();
    auto serving = lease_of(*pool, "tiny-llama-q4_0");
    lease_of(*pool, "tiny-llama-q8_0");
    lease_of(*pool, "tiny-qwen2-q8_0");
    EXPECT_EQ(loaded_ids(*pool), (std::vector<std::string>{"tiny-llama-q4_0", "tiny-qwen2-q8_0"}));
    EXPECT_GT(serving->service()->n_ctx(), 0);
}

TEST_F(ModelPoolTest, SaysWhyWhenEveryLoadedModelIsInUse) {
    auto pool = make_pool({.max_models = 1, .memory_bytes = 0, .keep_alive = -1ms});
    MINFER_REQUIRE_POOL(pool);
    auto busy = lease_of(*pool, "tiny-llama-q4_0");
    try {
        lease_of(*pool, "tiny-qwen2-q8_0");
        FAIL() << "loaded beyond --max-models 1";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 503);
        EXPECT_NE(std::string(e.what()).find("tiny-llama-q4_0"), std::string::npos) << e.what();
    }
    busy.reset();
    EXPECT_NE(lease_of(*pool, "tiny-qwen2-q8_0"), nullptr);
    EXPECT_EQ(loaded_ids(*pool), std::vector<std::string>{"tiny-qwen2-q8_0"});
}

TEST_F(ModelPoolTest, KeepsWithinTheMemoryBudget) {
    // Measure one model's cost, then allow a little more than the largest.
    uint64_t largest = 0;
    {
        auto probe = make_pool({});
        MINFER_REQUIRE_POOL(probe);
        for (const char* id : {"tiny-llama-q4_0", "tiny-qwen2-q8_0", "tiny-llama-q8_0"}) {
            auto lease = lease_of(*probe, id);
            for (const auto& m : probe->loaded()) largest = std::max(largest, m.bytes);
        }
    }
    auto pool = make_pool({.max_models = 3, .memory_bytes = largest + largest / 4,
                           .keep_alive = -1ms});
    lease_of(*pool, "tiny-llama-q4_0");
    lease_of(*pool, "tiny-qwen2-q8_0");
    EXPECT_EQ(loaded_ids(*pool), std::vector<std::string>{"tiny-qwen2-q8_0"});
    uint64_t used = 0;
    for (const auto& m : pool->loaded()) used += m.bytes;
    EXPECT_LE(used, largest + largest / 4);
    // A model larger than the whole budget can never load: 500, not 503.
    auto tight = make_pool({.max_models = 3, .memory_bytes = 1024, .keep_alive = -1ms});
    try {
        lease_of(*tight, "tiny-llama-q4_0");
        FAIL() << "loaded beyond --memory";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 500);
        EXPECT_NE(std::string(e.what()).find("--memory"), std::string::npos) << e.what();
    }
}

TEST_F(ModelPoolTest, UnloadsAfterTheKeepAlive) {
    auto pool = make_pool({.max_models = 3, .memory_bytes = 0, .keep_alive = 200ms});
    MINFER_REQUIRE_POOL(pool);
    auto a = lease_of(*pool, "tiny-llama-q4_0");
    lease_of(*pool, "tiny-qwen2-q8_0");
    // A request's own keep_alive wins: 0 unloads as soon as it ends, -1 keeps.
    acquire(*pool, "tiny-llama-q8_0", 0ms)->future.get();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (loaded_ids(*pool).size() > 1 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(10ms);
    // The model in use stays, whatever its keep-alive.
    EXPECT_EQ(loaded_ids(*pool), std::vector<std::string>{"tiny-llama-q4_0"});
    a.reset();
    acquire(*pool, "tiny-llama-q4_0", -1ms)->future.get();
    std::this_thread::sleep_for(400ms);
    EXPECT_EQ(loaded_ids(*pool), std::vector<std::string>{"tiny-llama-q4_0"});
    pool->unload_when_idle("tiny-llama-q4_0");
    while (!pool->loaded().empty() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(pool->loaded().empty());
}

TEST_F(ModelPoolTest, AModelThatFailsToLoadFailsItsRequestsAndTheOthersGoOn) {
    test::TempDir dir;
    const auto bad = dir / "broken.gguf";
    std::ofstream(bad) << "GGUF but not really";
    CatalogEntry broken;
    broken.reference = bad.string();
    auto pool = make_pool({}, {broken});
    MINFER_REQUIRE_POOL(pool);
    auto serving = lease_of(*pool, "tiny-llama-q4_0");
    auto first = acquire(*pool, "broken");
    auto second = acquire(*pool, "broken");
    EXPECT_THROW(first->future.get(), Error);
    EXPECT_THROW(second->future.get(), Error);
    EXPECT_EQ(loaded_ids(*pool), std::vector<std::string>{"tiny-llama-q4_0"});
    EXPECT_NE(lease_of(*pool, "tiny-qwen2-q8_0"), nullptr);
}

TEST_F(ModelPoolTest, RefusesAfterShutdownAndRemovesDeletedModels) {
    auto pool = make_pool({});
    MINFER_REQUIRE_POOL(pool);
    lease_of(*pool, "tiny-llama-q4_0");
    pool->remove("tiny-llama-q4_0");
    EXPECT_EQ(pool->find("tiny-llama-q4_0"), std::nullopt);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!pool->loaded().empty() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(10ms);
    EXPECT_TRUE(pool->loaded().empty());
    pool->shutdown(0ms);
    try {
        acquire(*pool, "tiny-qwen2-q8_0");
        FAIL() << "acquired after shutdown";
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 503);
    }
}

}  // namespace
}  // namespace minfer::server
