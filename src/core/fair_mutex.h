#pragma once
// A mutex handed over in arrival order (a ticket lock that sleeps). std::mutex lets the thread
// that unlocks take it straight back before a sleeping waiter wakes, so of two threads locking
// in a loop one can starve the other: two engines stepping on one shared thread pool (two models
// served at once) must alternate instead. Costs one uncontended std::mutex round trip more than
// std::mutex; meant for locks held for milliseconds (a forward pass), not nanoseconds.

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace minfer {

class FairMutex {
  public:
    void lock() {
        std::unique_lock lock(mutex_);
        const uint64_t ticket = next_ticket_++;
        turn_.wait(lock, [&] { return serving_ == ticket; });
    }
    void unlock() {
        {
            std::lock_guard lock(mutex_);
            ++serving_;
        }
        turn_.notify_all();
    }

  private:
    std::mutex mutex_;
    std::condition_variable turn_;
    uint64_t next_ticket_ = 0;  // the ticket the next lock() draws
    uint64_t serving_ = 0;      // the ticket that holds the lock (or takes it next)
};

}  // namespace minfer
