#pragma once
// Tree-parallel forward and back substitution with a CHOLMOD supernodal factor P A Pᵀ = L Lᵀ
// (internal to SparseCholesky).
//
// Why not cholmod_l_solve2: CHOLMOD walks the supernodes one after another (its parallelism is
// only inside BLAS calls, and the calls of a PD solve, 3 right-hand sides against supernodes of a
// few to a few thousand columns, are far too small for threaded BLAS), so a second thread gave a PD
// iteration nothing. The supernodal elimination tree has independent subtrees (METIS's nested
// dissection makes the top separators split the mesh into halves, quarters, ...):
//
//   forward  L y = P b: the supernodes of disjoint subtrees are solved concurrently; a supernode s
//            updates only rows of its ancestors, so every update into another task's subtree is
//            impossible and updates into the "top" (the separators above every task) go to the
//            task's own buffer, summed in task order before the top is solved;
//   backward Lᵀ z = y: the top first, then the subtrees concurrently; a supernode reads only its
//            ancestors' (final) values, so there is nothing to merge.
//
// The decomposition depends on the factor alone (never on the thread count) and every sum runs in
// a fixed order, so the result is bit-identical on 1, 2 or N threads.
#include <cholmod.h>
#include <tbb/enumerable_thread_specific.h>

#include <Eigen/Core>
#include <vector>

namespace xpd::detail {

/// I: the factor's index type (SuiteSparse_long for cholmod_l_* factors, int for cholmod_*).
template <class I>
class SupernodalSolveT {
 public:
  /// Scratch of one solve at a time: solve_in_place() uses the object's own; the x1 sweeps take
  /// the caller's, so that states sharing one factor can solve concurrently.
  struct Workspace {
    std::vector<double> Y;  // the right-hand sides, row-major n × k
    std::vector<long> offsets;
    std::vector<double> buffers;
    tbb::enumerable_thread_specific<std::vector<double>> work;  // per-thread supernode blocks
  };

  /// Reads the structure of a supernodal LLᵀ factor (is_super, is_ll, itype matching I); the
  /// factor must outlive this object and keep its values (numeric refactorization with the same
  /// pattern is fine).
  explicit SupernodalSolveT(const cholmod_factor* L);

  /// X := A⁻¹ X for n × k column-major X (any k ≥ 1), one pass over the factor.
  void solve_in_place(Eigen::Ref<Eigen::MatrixXd> X) const;

  /// Partial substitutions with a factor whose trailing columns n1..n−1 (the x2 block of a Schur
  /// complement ordering) start a supernode, over the supernodes before n1 only; B is n × k,
  /// column-major, in FACTOR order (no permutation applied):
  ///   forward_x1:  B1 := L11⁻¹ B1, B2 := B2 − L21 B1 (the new B1);
  ///   backward_x1: B2 holds u2; B1 := L11⁻ᵀ (B1 − L21ᵀ B2); B2 unchanged.
  /// Throws SolverError when no supernode starts at n1.
  void forward_x1(Eigen::Ref<Eigen::MatrixXd> B, long n1, Workspace& ws) const;
  void backward_x1(Eigen::Ref<Eigen::MatrixXd> B, long n1, Workspace& ws) const;
  /// The first supernode at or after column c, when one starts exactly at c; −1 otherwise.
  long supernode_starting_at(long c) const;

  long num_tasks() const { return static_cast<long>(tasks_.size()); }
  long num_top_supernodes() const { return static_cast<long>(top_.size()); }
  /// Fraction of the factor's values that lie in the serial top part.
  double top_fraction() const { return top_fraction_; }
  /// Bytes of the factor that one solve reads twice (values + row indices), for bandwidth figures.
  double factor_bytes() const { return factor_bytes_; }

 private:
  struct Task {
    long first = 0;  // supernodes first..last: one whole subtree (contiguous in postorder)
    long last = 0;
    long path_cols = 0;      // columns of the root's top ancestors: the rows of this task's buffer
    std::vector<long> slot;  // top position → first buffer row of that supernode, −1 if not an ancestor
  };
  // Supernode s: columns first..first+nscol−1, nsrow × nscol column-major values (the diagonal
  // block, then the rows below it), the row indices of those rows below.
  struct Supernode {
    long first = 0, nscol = 0, nsrow = 0;
    const double* values = nullptr;
    const I* rows = nullptr;
  };
  Supernode supernode(long s) const;
  // The sweeps over supernodes s < s_end (all: s_end = nsuper); forward/backward selects the
  // halves (a full solve runs both).
  template <int K>
  void forward_sweep(double* Y, long k, long s_end, Workspace& ws) const;
  template <int K>
  void backward_sweep(double* Y, long k, long s_end, Workspace& ws) const;
  template <int K>
  void sweep(Eigen::Ref<Eigen::MatrixXd> X) const;
  void x1_sweep(Eigen::Ref<Eigen::MatrixXd> B, long n1, Workspace& ws, bool forward) const;
  template <int K>
  void forward_supernode(long s, double* Y, long k, const Task* task, double* buffer, std::vector<double>& work) const;
  template <int K>
  void backward_supernode(long s, double* Y, long k, std::vector<double>& work) const;

  const cholmod_factor* L_;
  long n_ = 0;
  long nsuper_ = 0;
  std::vector<Task> tasks_;
  std::vector<long> top_;        // supernodes outside every task, in increasing (postorder) order
  std::vector<long> top_pos_;    // supernode → position in top_, −1 inside a task
  std::vector<long> col_super_;  // column → supernode
  double top_fraction_ = 0;
  double factor_bytes_ = 0;
  // Workspace of solve_in_place (like CHOLMOD's: its solves of one factor are not concurrent).
  mutable Workspace own_;
};

using SupernodalSolve = SupernodalSolveT<SuiteSparse_long>;

}  // namespace xpd::detail
