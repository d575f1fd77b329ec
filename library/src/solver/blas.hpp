#pragma once
// The Fortran BLAS routines the solver's own substitutions call (private to solver/): the BLAS
// CHOLMOD links (Debian's OpenBLAS or reference BLAS, 32-bit integers).
extern "C" {
void dgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
            const int* ldc);
void dtrsm_(const char* side, const char* uplo, const char* ta, const char* diag, const int* m, const int* n,
            const double* alpha, const double* a, const int* lda, double* b, const int* ldb);
}
