// Counts heap allocations made through the global operator new between Start and Stop, so a
// test can prove that a code path never allocates. allocation_counter.cc replaces the global
// operators for the whole test binary; outside a counting window they only forward to malloc.
//
//   StartCountingAllocations();
//   sampler.Sample(logits);
//   EXPECT_EQ(StopCountingAllocations(), 0);
#pragma once

namespace tessera::test {

void StartCountingAllocations();
// Returns the number of allocations since StartCountingAllocations.
int StopCountingAllocations();

}  // namespace tessera::test
