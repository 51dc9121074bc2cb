#include "base/sha256.h"

#include <gtest/gtest.h>

#include <string>

#include "test_support.h"

namespace tessera {
namespace {

// FIPS 180-4 / NIST example vectors.
TEST(Sha256Test, NistVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million_a(1000000, 'a');
  EXPECT_EQ(Sha256Hex(million_a),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, IncrementalEqualsOneShot) {
  Sha256 h;
  h.Update("ab");
  h.Update("");
  h.Update("c");
  EXPECT_EQ(h.FinishHex(), Sha256Hex("abc"));
  // The hasher restarts after FinishHex.
  h.Update("abc");
  EXPECT_EQ(h.FinishHex(), Sha256Hex("abc"));
}

TEST(Sha256Test, FilesAndGitBlobIds) {
  test::TempDir tmp;
  test::WriteFile(tmp.File("a"), "hello\n");
  auto digest = Sha256File(tmp.File("a"));
  ASSERT_TRUE(digest) << digest.status().message();
  EXPECT_EQ(*digest, Sha256Hex("hello\n"));
  // `printf 'hello\n' | git hash-object --stdin`
  auto blob = GitBlobIdOfFile(tmp.File("a"));
  ASSERT_TRUE(blob) << blob.status().message();
  EXPECT_EQ(*blob, "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_FALSE(Sha256File(tmp.File("missing")));
}

}  // namespace
}  // namespace tessera
