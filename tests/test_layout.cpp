// Shape, Layout views and the host-side layout helpers shared by the backends.
#include <limits>

#include "backend/strided.h"
#include "test_util.h"

namespace wick {
namespace {

TEST(Shape, NumelStringsAndStrides) {
  EXPECT_EQ(Shape({2, 3, 4}).numel(), 24);
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_EQ(Shape({3, 0}).numel(), 0);
  EXPECT_EQ(Shape({2, 3}).to_string(), "[2, 3]");
  EXPECT_EQ(contiguous_strides({2, 3, 4}), Strides({12, 4, 1}));
}

TEST(Shape, Broadcast) {
  EXPECT_EQ(broadcast_shapes({3, 1, 5}, {4, 5}, "t"), Shape({3, 4, 5}));
  EXPECT_EQ(broadcast_shapes({}, {2, 2}, "t"), Shape({2, 2}));
  EXPECT_EQ(broadcast_shapes({0, 1}, {1, 7}, "t"), Shape({0, 7}));
  EXPECT_THROW(broadcast_shapes({3}, {4}, "t"), ShapeError);
}

TEST(Layout, Contiguity) {
  EXPECT_TRUE(Layout(Shape{2, 3}).is_contiguous());
  EXPECT_FALSE(Layout(Shape{2, 3}).transpose(0, 1).is_contiguous());
  // Strides of size-1 dims do not matter, nor do they for empty layouts.
  EXPECT_TRUE(Layout({2, 1, 3}, {3, 100, 1}, 0).is_contiguous());
  EXPECT_TRUE(Layout({2, 0, 3}, {7, 9, 2}, 0).is_contiguous());
  EXPECT_TRUE(Layout(Shape{4, 6}).narrow(0, 1, 2).is_contiguous());
  EXPECT_FALSE(Layout(Shape{4, 6}).narrow(1, 1, 2).is_contiguous());
}

TEST(Layout, Views) {
  Layout l(Shape{4, 5, 6});
  Layout n = l.narrow(1, 2, 3);
  EXPECT_EQ(n.shape(), Shape({4, 3, 6}));
  EXPECT_EQ(n.offset(), 12);
  EXPECT_EQ(n.extent(), 12 + 3 * 30 + 2 * 6 + 5 + 1);

  Layout s = l.slice(-1, 1, 6, 2);
  EXPECT_EQ(s.shape(), Shape({4, 5, 3}));
  EXPECT_EQ(s.strides(), Strides({30, 6, 2}));
  EXPECT_EQ(s.offset(), 1);
  EXPECT_EQ(l.slice(0, -3, 100, 1).shape(), Shape({3, 5, 6}));

  Layout p = l.permute(std::vector<int64_t>{2, 0, 1});
  EXPECT_EQ(p.shape(), Shape({6, 4, 5}));
  EXPECT_EQ(p.strides(), Strides({1, 30, 6}));

  Layout b = Layout(Shape{5, 1}).broadcast_as({3, 5, 4});
  EXPECT_EQ(b.strides(), Strides({0, 1, 0}));

  Layout u = l.unsqueeze(1);
  EXPECT_EQ(u.shape(), Shape({4, 1, 5, 6}));
  EXPECT_EQ(u.squeeze(1), l);
  EXPECT_EQ(l.squeeze(0), l);  // not size 1: unchanged
  EXPECT_EQ(l.unsqueeze(-1).shape(), Shape({4, 5, 6, 1}));
}

TEST(Layout, ReshapeViews) {
  Layout l(Shape{4, 6});
  EXPECT_EQ(l.reshape({2, 2, 6})->strides(), Strides({12, 6, 1}));
  // A narrowed row block is still contiguous; a transposed matrix can split its dims but not merge them.
  EXPECT_TRUE(l.narrow(0, 1, 2).reshape({12}).has_value());
  Layout t = l.transpose(0, 1);  // [6, 4] strides [1, 6]
  EXPECT_FALSE(t.reshape({24}).has_value());
  auto split = t.reshape({2, 3, 4});
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->strides(), Strides({3, 1, 6}));
  EXPECT_THROW((void)l.reshape({5, 5}), ShapeError);
}

TEST(Layout, RejectsBadStrides) {
  EXPECT_THROW(Layout({2}, {-1}, 0), ShapeError);
  EXPECT_THROW(Layout({2, 2}, {1}, 0), ShapeError);
  EXPECT_THROW(Layout(Shape{3}).narrow(0, 2, 2), IndexError);
  EXPECT_THROW(Layout(Shape{3}).slice(0, 0, 3, 0), ShapeError);
  EXPECT_THROW(Layout(Shape{3}).permute(std::vector<int64_t>{0, 0}), ShapeError);
}

constexpr int64_t kBig = std::numeric_limits<int64_t>::max();

TEST(Shape, NumelRefusesOverflowEvenWhenEmpty) {
  EXPECT_THROW(Shape({int64_t(1) << 32, int64_t(1) << 32}).numel(), ShapeError);
  EXPECT_THROW(Shape({0, int64_t(1) << 40, int64_t(1) << 40}).numel(), ShapeError);
  EXPECT_EQ(Shape({0, int64_t(1) << 40}).numel(), 0);
  // An empty dim counts as 1 for the strides above it, so they do not collapse to 0.
  EXPECT_EQ(contiguous_strides({2, 0, 3}), Strides({3, 3, 1}));
}

TEST(Layout, RefusesLayoutsThatWrap) {
  // The largest offset, (2 - 1) * 2^62 * 2, passes 2^63 - 1.
  EXPECT_THROW(Layout({3}, {int64_t(1) << 62}, 0), ShapeError);
  EXPECT_THROW(Layout({2}, {1}, kBig), ShapeError);
  EXPECT_THROW(Layout(Shape{int64_t(1) << 40, int64_t(1) << 40}), ShapeError);
  EXPECT_NO_THROW(Layout({2}, {1}, kBig - 2));
  EXPECT_EQ(Layout({2}, {1}, kBig - 2).extent(), kBig);
  EXPECT_THROW(Layout(Shape{4}).broadcast_as({int64_t(1) << 40, int64_t(1) << 40, 4}), ShapeError);
}

TEST(Layout, ViewsWithExtremeArgumentsNeverWrap) {
  const Layout l({3, 5}, {5, 1}, 0);
  EXPECT_THROW(l.narrow(1, kBig, 2), IndexError);
  EXPECT_THROW(l.narrow(1, 2, kBig), IndexError);
  EXPECT_THROW(l.narrow(1, -1, 1), IndexError);
  const Layout s = l.slice(1, 0, kBig, kBig);  // one element: the stride is left alone
  EXPECT_EQ(s.shape(), Shape({3, 1}));
  EXPECT_EQ(l.slice(1, std::numeric_limits<int64_t>::min(), kBig, 2).shape(), Shape({3, 3}));
  EXPECT_EQ(l.slice(1, 4, 2, 1).shape(), Shape({3, 0}));
  // A size-1 dim's stride addresses nothing: unsqueeze does not overflow making one.
  const Layout wide({1, 2}, {kBig - 1, 1}, 0);
  EXPECT_EQ(wide.unsqueeze(0).shape(), Shape({1, 1, 2}));
}

TEST(Layout, NonOverlapping) {
  EXPECT_TRUE(Layout(Shape{4, 6}).is_non_overlapping());
  EXPECT_TRUE(Layout(Shape{4, 6}).transpose(0, 1).slice(0, 1, 6, 2).is_non_overlapping());
  EXPECT_TRUE(Layout({3, 1, 2}, {0, 0, 1}, 0).slice(0, 0, 1, 1).is_non_overlapping());  // size-1 dims are free
  EXPECT_TRUE(Layout({2, 0}, {0, 0}, 0).is_non_overlapping());                          // empty
  EXPECT_FALSE(Layout({4}, {0}, 0).is_non_overlapping());
  EXPECT_FALSE(Layout({3, 3}, {1, 1}, 0).is_non_overlapping());
  EXPECT_FALSE(Layout({2, 3}, {2, 1}, 0).is_non_overlapping());  // (0, 2) and (1, 0) meet
  EXPECT_TRUE(Layout({2, 3}, {3, 1}, 0).is_non_overlapping());
}

TEST(Device, ParsesOnlyWellFormedNames) {
  Device d;
  EXPECT_TRUE(Device::parse("cuda:7", &d));
  EXPECT_EQ(d, Device::cuda(7));
  EXPECT_TRUE(Device::parse("rocm", &d));
  EXPECT_EQ(d, Device::rocm(0));
  EXPECT_TRUE(Device::parse("cuda:1023", &d));
  for (const char* bad : {"cuda:huge", "cuda:99999999999", "cuda:4294967297", "cuda:1024", "cuda:-1", "cuda:",
                          "cuda:1x", "cuda: 1", "cuda:+1", "CPU", "", "cpu:0:0", "cpu:x", "gpu:0"}) {
    Device before = Device::cpu();
    Device out = before;
    EXPECT_FALSE(Device::parse(bad, &out)) << bad;
    EXPECT_EQ(out, before) << bad;
  }
}

TEST(Strided, CollapsesContiguousOperands) {
  Layout a(Shape{4, 5, 6}), b(Shape{4, 5, 6});
  StridedSpace<2> s = collapse<2>({&a, &b});
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.shape[0], 120);
  EXPECT_TRUE(s.all_dense());
  EXPECT_TRUE(s.fits_int32());
}

TEST(Strided, KeepsWhatCannotMerge) {
  Layout out(Shape{4, 5, 6});
  Layout t = Layout(Shape{4, 6, 5}).transpose(1, 2);
  StridedSpace<2> s = collapse<2>({&out, &t});
  EXPECT_EQ(s.rank, 3);
  Layout bias = Layout(Shape{6}).broadcast_as({4, 5, 6});  // stride-0 outer dims merge together
  StridedSpace<2> sb = collapse<2>({&out, &bias});
  EXPECT_EQ(sb.rank, 2);
  EXPECT_EQ(sb.shape[0], 20);
  EXPECT_EQ(sb.strides[1][0], 0);
  EXPECT_FALSE(sb.dense(1));
}

TEST(Strided, Classify) {
  EXPECT_EQ(classify(Layout(Shape{3, 4}).narrow(0, 1, 2)), LayoutKind::Contiguous);
  EXPECT_EQ(classify(Layout(Shape{1}).broadcast_as({3, 4})), LayoutKind::Scalar);
  EXPECT_EQ(classify(Layout(Shape{4}).broadcast_as({3, 4})), LayoutKind::General);
  EXPECT_EQ(classify(Layout(Shape{3, 4}).transpose(0, 1)), LayoutKind::General);
}

TEST(Strided, SizeOneAndEmptySpaces) {
  Layout one(Shape{1, 1}), empty(Shape{3, 0});
  StridedSpace<1> s1 = collapse<1>({&one});
  EXPECT_EQ(s1.rank, 1);
  EXPECT_EQ(s1.numel(), 1);
  EXPECT_EQ(collapse<1>({&empty}).numel(), 0);
  Layout big(Shape{int64_t(1) << 31, 2}, Strides{2, 1}, 0);
  EXPECT_FALSE(collapse<1>({&big}).fits_int32());
}

}  // namespace
}  // namespace wick
