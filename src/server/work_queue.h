#pragma once
// A few threads for the work a request needs before it reaches the engine (parsing its JSON,
// rendering the chat template, tokenizing), so that the HTTP thread never waits on it.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace minfer::server {

class WorkQueue {
  public:
    explicit WorkQueue(int n_threads) {
        for (int i = 0; i < n_threads; ++i) threads_.emplace_back([this] { work(); });
    }
    ~WorkQueue() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        for (auto& t : threads_) t.join();  // after the queue is empty
    }
    WorkQueue(const WorkQueue&) = delete;
    WorkQueue& operator=(const WorkQueue&) = delete;

    void post(std::function<void()> task) {
        {
            std::lock_guard lock(mutex_);
            tasks_.push_back(std::move(task));
        }
        wake_.notify_one();
    }

  private:
    void work() {
        while (true) {
            std::function<void()> task;
            {
                std::unique_lock lock(mutex_);
                wake_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
                if (tasks_.empty()) return;
                task = std::move(tasks_.front());
                tasks_.pop_front();
            }
            // A task answers its own request; one that throws anyway must not end the process.
            try {
                task();
            } catch (const std::exception& e) {
                log_warning(concat("minfer: a request's work failed: ", e.what()));
            } catch (...) {
                log_warning("minfer: a request's work failed");
            }
        }
    }

    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::function<void()>> tasks_;
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace minfer::server
